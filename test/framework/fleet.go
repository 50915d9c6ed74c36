package framework

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// FleetReplica is a platform-apiserver started by StartFleetReplica: the
// framework's binary with the arguments of its first start (so
// Options.ExtraPlatformArgs too) plus a port of its own and the replica's
// extra arguments. Its own port lets a benchmark read each replica's
// /metrics and /readyz, which replicas sharing one port
// (StartPlatformReplica) cannot tell apart.
type FleetReplica struct {
	cp   *ControlPlane
	name string
	port int
	proc *process
}

// StartFleetReplica starts one more platform-apiserver named name (its log is
// <WorkDir>/<name>.log) on a free port of its own, with extraArgs appended
// to the framework's platform arguments (a later flag wins, so e.g.
// --postgres-dsn can point it at another database), and waits up to
// readyTimeout until it answers /readyz on its port. The framework's own
// platform-apiserver need not run. It is not registered with the
// aggregator.
func (cp *ControlPlane) StartFleetReplica(ctx context.Context, name string, extraArgs []string, readyTimeout time.Duration) (*FleetReplica, error) {
	if cp.platformBinary == "" || len(cp.platformArgs) == 0 {
		return nil, fmt.Errorf("start fleet replica %s: the control plane has not prepared the platform-apiserver", name)
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	tlsConfig, err := tlsTo(cp.pki.platformCA.certPEM, cp.pki.admin)
	if err != nil {
		return nil, err
	}
	args := append(append(append([]string(nil), cp.platformArgs...), extraArgs...), "--secure-port="+strconv.Itoa(port))
	url := "https://127.0.0.1:" + strconv.Itoa(port)
	proc, err := cp.startComponent(ctx, name, cp.platformBinary, args, readyTimeout, httpCheck(url+"/readyz", tlsConfig))
	if err != nil {
		return nil, fmt.Errorf("start fleet replica %s: %w", name, err)
	}
	return &FleetReplica{cp: cp, name: name, port: port, proc: proc}, nil
}

// Name returns the replica's name, as given to StartFleetReplica.
func (r *FleetReplica) Name() string { return r.name }

// PID returns the replica's process id, or 0 once it has exited.
func (r *FleetReplica) PID() int {
	if done, _ := r.proc.exited(); done {
		return 0
	}
	return r.proc.pid()
}

// URL returns the replica's own https URL; it trusts PlatformServingCA.
func (r *FleetReplica) URL() string { return "https://127.0.0.1:" + strconv.Itoa(r.port) }

// LogPath returns the file the replica's output goes to.
func (r *FleetReplica) LogPath() string { return r.proc.logPath() }

// Stop ends the replica gracefully (SIGTERM, then SIGKILL after a grace period).
func (r *FleetReplica) Stop() error { return r.proc.stop() }

// Kill sends SIGKILL and waits until the replica is gone.
func (r *FleetReplica) Kill() error { return r.proc.kill() }

// Metrics returns the replica's /metrics (Prometheus text format), read
// from its own port as the admin.
func (r *FleetReplica) Metrics(ctx context.Context) (string, error) {
	body, err := r.Get(ctx, "/metrics")
	return string(body), err
}

// Get reads path (e.g. /metrics, /debug/pprof/heap) from the replica's own
// port as the admin, on a connection of its own.
func (r *FleetReplica) Get(ctx context.Context, path string) ([]byte, error) {
	tlsConfig, err := tlsTo(r.cp.pki.platformCA.certPEM, r.cp.pki.admin)
	if err != nil {
		return nil, err
	}
	client := &http.Client{Timeout: time.Minute, Transport: &http.Transport{TLSClientConfig: tlsConfig, DisableKeepAlives: true}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.URL()+path, nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("GET %s of %s: %w", path, r.name, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("GET %s of %s: %w", path, r.name, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s of %s: %s", path, r.name, resp.Status)
	}
	return body, nil
}

// MigratePlatformDatabase runs `platform-apiserver migrate` (the framework's
// binary) against dsn, so a replica's first start finds its schema in place.
func (cp *ControlPlane) MigratePlatformDatabase(ctx context.Context, dsn string) error {
	if cp.platformBinary == "" {
		return fmt.Errorf("migrate: no platform-apiserver binary resolved")
	}
	// --postgres-allow-insecure: the tests' databases have no TLS (sslmode=disable).
	cmd := exec.CommandContext(ctx, cp.platformBinary, "migrate", "--postgres-dsn="+dsn, "--postgres-allow-insecure")
	cmd.Dir = cp.workDir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s migrate: %w: %s", filepath.Base(cp.platformBinary), err, strings.TrimSpace(out.String()))
	}
	return nil
}

// SimulatedNodeObject returns the Node CreateSimulatedNode would create for
// spec, without creating it or waiting for it, so a benchmark can create
// thousands concurrently and wait for them in bulk. kwok makes it Ready
// (with its address and kubelet port) once it is created; it needs
// Options.StartSimulator.
func SimulatedNodeObject(spec SimulatedNode) *corev1.Node { return simulatedNodeObject(spec) }

// RestartSimulatorComponent stops the simulator's kwok or metrics-server
// (name) and starts it again on the same port with flags overridden (flag
// name without dashes → value; a flag not yet given is appended), then waits
// until it is healthy. The fleet benchmark runs kwok without node Leases:
// with thousands of nodes their renewals (one per node every 10s) and kwok's
// rule that it manages only the nodes whose Lease it holds would swamp the
// control plane on a small machine, and without kube-controller-manager
// nothing reads them.
func (cp *ControlPlane) RestartSimulatorComponent(ctx context.Context, name string, flags map[string]string) error {
	if cp.sim == nil {
		return fmt.Errorf("restart %s: the simulator is not running (set Options.StartSimulator)", name)
	}
	var (
		proc    **process
		healthz string
		timeout time.Duration
		client  *keyPair
	)
	switch name {
	case "kwok":
		proc, timeout = &cp.sim.kwok, kwokStartTimeout
		healthz = "https://127.0.0.1:" + strconv.Itoa(cp.sim.kwokPort) + "/healthz"
	case "metrics-server":
		proc, timeout, client = &cp.sim.metricsServer, metricsServerStartTimeout, cp.pki.admin
		healthz = "https://127.0.0.1:" + strconv.Itoa(cp.sim.metricsPort) + "/livez"
	default:
		return fmt.Errorf("restart %s: not a simulator component (kwok, metrics-server)", name)
	}
	old := *proc
	args := overrideFlags(old.spec.args, flags)
	tlsConfig, err := tlsTo(cp.pki.clusterCA.certPEM, client)
	if err != nil {
		return err
	}
	if err := old.stop(); err != nil {
		return fmt.Errorf("restart %s: %w", name, err)
	}
	p, err := cp.startComponent(ctx, name, old.spec.path, args, timeout, httpCheck(healthz, tlsConfig))
	if err != nil {
		return fmt.Errorf("restart %s: %w", name, err)
	}
	*proc = p
	return nil
}

// overrideFlags returns args with each --name=value of flags replacing the
// argument of that name, or appended when args has none.
func overrideFlags(args []string, flags map[string]string) []string {
	out := append([]string(nil), args...)
	for name, value := range flags {
		arg, found := "--"+name+"="+value, false
		for i, a := range out {
			if a == "--"+name || strings.HasPrefix(a, "--"+name+"=") {
				out[i], found = arg, true
			}
		}
		if !found {
			out = append(out, arg)
		}
	}
	return out
}
