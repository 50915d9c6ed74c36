package framework

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"
)

const platformStartTimeout = 2 * time.Minute

// preparePlatform picks the platform-apiserver's port and flags once, so every
// later start (after a kill or a restart) runs with the same arguments on the
// port the APIService points at.
func (cp *ControlPlane) preparePlatform() error {
	port, err := freePort()
	if err != nil {
		return err
	}
	cp.platformPort = port
	p := cp.pki
	cp.platformArgs = append([]string{
		"--secure-port=" + strconv.Itoa(port),
		"--bind-address=127.0.0.1",
		"--tls-cert-file=" + p.platformServing.certFile,
		"--tls-private-key-file=" + p.platformServing.keyFile,
		"--authentication-kubeconfig=" + cp.adminKubeconfig,
		"--authorization-kubeconfig=" + cp.adminKubeconfig,
		"--postgres-dsn=" + cp.databaseURL,
		// The tests' PostgreSQL listens on 127.0.0.1 without TLS
		// (sslmode=disable), which the server refuses unless told.
		"--postgres-allow-insecure",
	}, cp.opts.ExtraPlatformArgs...)
	return nil
}

// StartPlatformAPIServer starts the platform-apiserver with the arguments of
// its first start and waits until it answers /readyz directly and its group
// is served through kube-apiserver. It is an error if it is already running.
func (cp *ControlPlane) StartPlatformAPIServer(ctx context.Context) error {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	return cp.startPlatformLocked(ctx)
}

func (cp *ControlPlane) startPlatformLocked(ctx context.Context) error {
	if cp.platform != nil {
		if done, _ := cp.platform.exited(); !done {
			return fmt.Errorf("platform-apiserver is already running (pid %d)", cp.platform.pid())
		}
	}
	tlsConfig, err := tlsTo(cp.pki.platformCA.certPEM, cp.pki.admin)
	if err != nil {
		return err
	}
	proc, err := cp.startComponent(ctx, "platform-apiserver", cp.platformBinary, cp.platformArgs, platformStartTimeout,
		httpCheck(cp.PlatformServerURL()+"/readyz", tlsConfig))
	if err != nil {
		return fmt.Errorf("start platform-apiserver: %w", err)
	}
	cp.platform = proc
	if cp.platformRegistered {
		return cp.waitPlatformServed(ctx)
	}
	return nil
}

// StopPlatformAPIServer stops the platform-apiserver gracefully (SIGTERM, then
// SIGKILL after a grace period). Stopping a stopped server is not an error.
func (cp *ControlPlane) StopPlatformAPIServer() error {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	if cp.platform == nil {
		return nil
	}
	return cp.platform.stop()
}

// KillPlatformAPIServer sends SIGKILL to the platform-apiserver and waits
// until it is gone, to test recovery from a crash.
func (cp *ControlPlane) KillPlatformAPIServer() error {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	if cp.platform == nil {
		return errors.New("platform-apiserver was never started")
	}
	return cp.platform.kill()
}

// RestartPlatformAPIServer stops the platform-apiserver (if running) and starts
// it again with the same arguments, waiting for readiness as Start does.
func (cp *ControlPlane) RestartPlatformAPIServer(ctx context.Context) error {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	if cp.platform != nil {
		if err := cp.platform.stop(); err != nil {
			return fmt.Errorf("restart platform-apiserver: %w", err)
		}
	}
	return cp.startPlatformLocked(ctx)
}

// PlatformAPIServerPID returns the pid of the running platform-apiserver, or 0
// when it is not running.
func (cp *ControlPlane) PlatformAPIServerPID() int {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	if cp.platform == nil {
		return 0
	}
	if done, _ := cp.platform.exited(); done {
		return 0
	}
	return cp.platform.pid()
}

// Replica is an extra platform-apiserver started by StartPlatformReplica.
type Replica struct{ proc *process }

// Stop ends the replica gracefully (SIGTERM, then SIGKILL after a grace period).
func (r *Replica) Stop() error { return r.proc.stop() }

// Kill sends SIGKILL and waits until the replica is gone, as a crash would.
func (r *Replica) Kill() error { return r.proc.kill() }

// StartPlatformReplica starts one more platform-apiserver with the same
// arguments on the same port, as a second replica behind the APIService would
// run: the kernel spreads new connections over both, and one keeps serving
// while the other restarts. The first start needs --permit-port-sharing in
// Options.ExtraPlatformArgs too.
func (cp *ControlPlane) StartPlatformReplica(ctx context.Context, name string) (*Replica, error) {
	return cp.StartPlatformReplicaOf(ctx, name, cp.platformBinary)
}

// StartPlatformReplicaOf is StartPlatformReplica with another binary (an
// earlier or later release, side by side with this one).
func (cp *ControlPlane) StartPlatformReplicaOf(ctx context.Context, name, binary string) (*Replica, error) {
	tlsConfig, err := tlsTo(cp.pki.platformCA.certPEM, cp.pki.admin)
	if err != nil {
		return nil, err
	}
	proc, err := cp.startComponent(ctx, name, binary, cp.platformArgs, platformStartTimeout,
		httpCheck(cp.PlatformServerURL()+"/readyz", tlsConfig))
	if err != nil {
		return nil, fmt.Errorf("start platform-apiserver replica %s: %w", name, err)
	}
	return &Replica{proc: proc}, nil
}
