// Package postgres starts throwaway PostgreSQL servers for tests and for
// `make run`: initdb into a temp dir, postgres on 127.0.0.1 and a free port,
// stopped by the pid it started.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"
)

// Options tunes Start. The zero value is fine.
type Options struct {
	// BinDir holds initdb and postgres; default: `pg_config --bindir`, then
	// /usr/lib/postgresql/15/bin.
	BinDir string
	// StartTimeout bounds how long Start waits for the server to accept
	// connections; default 60s.
	StartTimeout time.Duration
	// TLS makes the server serve TLS with a certificate for 127.0.0.1 and
	// localhost from a CA generated for it (EnableTLS; CAFile, TLSDSN).
	TLS bool
	// Settings are more server settings (name=value, as postgres -c takes
	// them), e.g. shared_preload_libraries=pg_stat_statements.
	Settings []string
}

// Instance is a running ephemeral server.
type Instance struct {
	dir     string
	bin     string
	run     runner
	timeout time.Duration
	port    int
	cmd     *exec.Cmd
	exited  chan struct{}
	waitErr error
	logPath string
	// settings are Options.Settings, kept for restarts.
	settings []string
}

// Start initializes a fresh cluster in a temp dir and starts postgres on it.
// As root, initdb and postgres run as the `postgres` system user, since both
// refuse to run as root.
func Start(ctx context.Context, opts Options) (*Instance, error) {
	bin, err := findBinDir(opts.BinDir)
	if err != nil {
		return nil, err
	}
	if opts.StartTimeout == 0 {
		opts.StartTimeout = 60 * time.Second
	}
	run, err := currentRunner()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "pgtest-")
	if err != nil {
		return nil, fmt.Errorf("create temp dir: %w", err)
	}
	if err := run.own(dir); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	inst := &Instance{dir: dir, bin: bin, run: run, timeout: opts.StartTimeout, logPath: filepath.Join(dir, "postgres.log"), exited: make(chan struct{}), settings: opts.Settings}
	if err := inst.initdb(ctx, run, bin); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	// A free port can be taken by someone else between probe and bind; retry.
	for attempt := 0; ; attempt++ {
		err = inst.start(ctx, run, bin, opts.StartTimeout)
		if err == nil {
			klog.FromContext(ctx).V(2).Info("Started ephemeral PostgreSQL", "dir", dir, "port", inst.port, "pid", inst.cmd.Process.Pid)
			if opts.TLS {
				if err := inst.EnableTLS(ctx, TLSOptions{}); err != nil {
					_ = inst.Stop()
					return nil, err
				}
			}
			return inst, nil
		}
		if attempt == 2 || !errors.Is(err, errExitedEarly) {
			_ = os.RemoveAll(dir)
			return nil, err
		}
		inst.exited = make(chan struct{})
		inst.port = 0
	}
}

// Pause stops the server (fast shutdown) but keeps its data and port, so
// tests can take the database away from a running system and give it back.
func (i *Instance) Pause() error {
	if err := i.cmd.Process.Signal(os.Interrupt); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("signal postgres pid %d: %w", i.cmd.Process.Pid, err)
	}
	select {
	case <-i.exited:
		return nil
	case <-time.After(30 * time.Second):
		return fmt.Errorf("postgres pid %d did not stop within 30s%s", i.cmd.Process.Pid, i.logTail())
	}
}

// Resume starts a paused server again on the same port and data.
func (i *Instance) Resume(ctx context.Context) error {
	i.exited = make(chan struct{})
	return i.start(ctx, i.run, i.bin, i.timeout)
}

// DSN is a libpq URL for the `postgres` database as the `postgres` superuser.
func (i *Instance) DSN() string {
	u := url.URL{
		Scheme:   "postgres",
		User:     url.User("postgres"),
		Host:     net.JoinHostPort("127.0.0.1", strconv.Itoa(i.port)),
		Path:     "/postgres",
		RawQuery: "sslmode=disable",
	}
	return u.String()
}

// Stop shuts the server down (fast shutdown, SIGINT to the pid Start started),
// waits for it and removes the temp dir.
func (i *Instance) Stop() error {
	defer os.RemoveAll(i.dir)
	select {
	case <-i.exited:
		return nil
	default:
	}
	if err := i.cmd.Process.Signal(os.Interrupt); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("signal postgres pid %d: %w", i.cmd.Process.Pid, err)
	}
	select {
	case <-i.exited:
		return nil
	case <-time.After(30 * time.Second):
		_ = i.cmd.Process.Kill()
		<-i.exited
		return fmt.Errorf("postgres pid %d did not stop within 30s; killed%s", i.cmd.Process.Pid, i.logTail())
	}
}

var errExitedEarly = errors.New("postgres exited before accepting connections")

func (i *Instance) initdb(ctx context.Context, run runner, bin string) error {
	cmd := exec.CommandContext(ctx, filepath.Join(bin, "initdb"),
		"-D", filepath.Join(i.dir, "data"), "-U", "postgres", "--auth=trust",
		"--encoding=UTF8", "--locale=C", "--no-sync", "--no-instructions")
	run.apply(cmd)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("initdb: %w\n%s", err, out)
	}
	return nil
}

// start runs postgres on i.port, or on a free port when it has none yet.
func (i *Instance) start(ctx context.Context, run runner, bin string, timeout time.Duration) error {
	if i.port == 0 {
		port, err := freePort()
		if err != nil {
			return err
		}
		i.port = port
	}
	port := i.port
	logFile, err := os.OpenFile(i.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("open postgres log: %w", err)
	}
	defer logFile.Close()
	if err := run.ownFile(i.logPath); err != nil {
		return err
	}
	// Not CommandContext: the server outlives ctx and is stopped by Stop.
	args := []string{
		"-D", filepath.Join(i.dir, "data"),
		"-c", "listen_addresses=127.0.0.1",
		"-c", "port=" + strconv.Itoa(port),
		"-c", "unix_socket_directories=" + i.dir,
		"-c", "fsync=off",
		"-c", "synchronous_commit=off",
		"-c", "full_page_writes=off",
		"-c", "max_connections=200",
	}
	for _, setting := range i.settings {
		args = append(args, "-c", setting)
	}
	i.cmd = exec.Command(filepath.Join(bin, "postgres"), args...)
	i.cmd.Stdout, i.cmd.Stderr = logFile, logFile
	run.apply(i.cmd)
	if err := i.cmd.Start(); err != nil {
		return fmt.Errorf("start postgres: %w", err)
	}
	go func() {
		i.waitErr = i.cmd.Wait()
		close(i.exited)
	}()
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		select {
		case <-i.exited:
			if i.waitErr == nil {
				return false, errExitedEarly
			}
			return false, fmt.Errorf("%w (%w)", errExitedEarly, i.waitErr)
		default:
		}
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		conn, err := pgx.Connect(cctx, i.DSN())
		if err != nil {
			return false, nil
		}
		_ = conn.Close(cctx)
		return true, nil
	})
	if err != nil {
		if !errors.Is(err, errExitedEarly) {
			_ = i.Stop()
		}
		return fmt.Errorf("postgres on port %d not ready: %w%s", port, err, i.logTail())
	}
	return nil
}

// logTail returns the last lines of the server log, for error messages.
func (i *Instance) logTail() string {
	b, err := os.ReadFile(i.logPath)
	if err != nil || len(b) == 0 {
		return ""
	}
	const max = 2000
	if len(b) > max {
		b = b[len(b)-max:]
	}
	return "\n--- postgres log tail (" + i.logPath + ") ---\n" + string(b)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func findBinDir(dir string) (string, error) {
	var candidates []string
	if dir != "" {
		candidates = []string{dir}
	} else {
		if out, err := exec.Command("pg_config", "--bindir").Output(); err == nil {
			candidates = append(candidates, string(trimNL(out)))
		}
		candidates = append(candidates, "/usr/lib/postgresql/15/bin")
	}
	for _, c := range candidates {
		if isExecutable(filepath.Join(c, "initdb")) && isExecutable(filepath.Join(c, "postgres")) {
			return c, nil
		}
	}
	return "", fmt.Errorf("PostgreSQL server binaries (initdb, postgres) not found in %v; install them with `apt-get install postgresql-15` or set TEST_DATABASE_URL", candidates)
}

func isExecutable(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir() && st.Mode()&0o111 != 0
}

func trimNL(b []byte) []byte {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == '\r') {
		b = b[:len(b)-1]
	}
	return b
}
