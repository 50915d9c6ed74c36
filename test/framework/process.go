package framework

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"
)

// stopGrace is how long a process gets between SIGTERM and SIGKILL.
const stopGrace = 15 * time.Second

// processSpec says how to run one long-lived component.
type processSpec struct {
	name string // short name, also the log file's base name
	path string
	args []string
	dir  string
	// logDir receives <name>.log; extra, when set, also receives the output.
	logDir string
	extra  io.Writer
}

// process is one running component started in its own process group.
type process struct {
	spec    processSpec
	cmd     *exec.Cmd
	logFile *os.File
	done    chan struct{}
	// logger is the starter's, for stop and kill (called from cleanups,
	// which have no context).
	logger klog.Logger

	mu      sync.Mutex
	exitErr error
}

// startProcess starts spec's binary. It does not wait for readiness.
func startProcess(ctx context.Context, spec processSpec) (*process, error) {
	logPath := filepath.Join(spec.logDir, spec.name+".log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open log file for %s: %w", spec.name, err)
	}
	var out io.Writer = logFile
	if spec.extra != nil {
		out = io.MultiWriter(logFile, spec.extra)
	}
	cmd := exec.Command(spec.path, spec.args...)
	cmd.Dir = spec.dir
	// One writer for both streams, so os/exec copies them in one goroutine.
	cmd.Stdout = out
	cmd.Stderr = out
	cmd.SysProcAttr = &syscall.SysProcAttr{
		// Own process group, so a stop reaches the component's children too.
		Setpgid: true,
		// Do not outlive a test binary that dies without running cleanups. (Linux
		// sends it when the forking thread exits; Go only retires threads
		// whose goroutine called LockOSThread and never unlocked.)
		Pdeathsig: syscall.SIGKILL,
	}
	fmt.Fprintf(logFile, "### %s: %s %q\n", time.Now().Format(time.RFC3339), spec.path, redactArgs(spec.args))
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("start %s (%s): %w", spec.name, spec.path, err)
	}
	p := &process{spec: spec, cmd: cmd, logFile: logFile, done: make(chan struct{}), logger: klog.FromContext(ctx)}
	go func() {
		err := cmd.Wait()
		p.mu.Lock()
		p.exitErr = err
		p.mu.Unlock()
		logFile.Close()
		close(p.done)
	}()
	p.logger.Info("Started process", "name", spec.name, "pid", cmd.Process.Pid, "log", logPath)
	return p, nil
}

// pid returns the process id of the component.
func (p *process) pid() int { return p.cmd.Process.Pid }

// logPath returns the file the component's output goes to.
func (p *process) logPath() string { return filepath.Join(p.spec.logDir, p.spec.name+".log") }

// errExitStatus0 is what exited reports for a component that exited cleanly.
var errExitStatus0 = errors.New("exit status 0")

// exited reports whether the process has ended, and how.
//
// A component is meant to run until stopped, so a clean exit is an error too:
// errExitStatus0.
func (p *process) exited() (bool, error) {
	select {
	case <-p.done:
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.exitErr == nil {
			return true, errExitStatus0
		}
		return true, p.exitErr
	default:
		return false, nil
	}
}

// waitReady polls check until it succeeds, the process exits, or timeout passes.
// Its error names the component and carries the tail of its log.
func (p *process) waitReady(ctx context.Context, timeout time.Duration, check func(context.Context) error) error {
	var lastErr error
	start := time.Now()
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		if done, exitErr := p.exited(); done {
			return false, fmt.Errorf("%s exited before it became ready: %w", p.spec.name, exitErr)
		}
		if lastErr = check(ctx); lastErr != nil {
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		if lastErr != nil && !errors.Is(err, lastErr) {
			err = fmt.Errorf("%w (last check: %w)", err, lastErr)
		}
		return fmt.Errorf("waiting for %s to become ready: %w; see %s, last lines:\n%s",
			p.spec.name, err, p.logPath(), logTail(p.logPath(), 30))
	}
	klog.FromContext(ctx).Info("Process ready", "name", p.spec.name, "pid", p.pid(), "after", time.Since(start).Round(time.Millisecond))
	return nil
}

// stop sends SIGTERM to the process group, then SIGKILL after stopGrace, and
// waits for the process to be reaped.
func (p *process) stop() error {
	if done, _ := p.exited(); done {
		return nil
	}
	pid := p.pid()
	if err := syscall.Kill(-pid, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("send SIGTERM to %s (pid %d): %w", p.spec.name, pid, err)
	}
	select {
	case <-p.done:
		p.logger.Info("Stopped process", "name", p.spec.name, "pid", pid)
		return nil
	case <-time.After(stopGrace):
	}
	p.logger.Info("Process ignored SIGTERM, killing it", "name", p.spec.name, "pid", pid, "grace", stopGrace)
	return p.kill()
}

// kill sends SIGKILL to the process group and waits for the process to be reaped.
func (p *process) kill() error {
	if done, _ := p.exited(); done {
		return nil
	}
	pid := p.pid()
	if err := syscall.Kill(-pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("send SIGKILL to %s (pid %d): %w", p.spec.name, pid, err)
	}
	<-p.done
	p.logger.Info("Killed process", "name", p.spec.name, "pid", pid)
	return nil
}

// redactArgs hides passwords in DSN-valued flags before they reach a log.
func redactArgs(args []string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = a
		name, value, ok := strings.Cut(a, "=")
		if !ok || !strings.HasSuffix(name, "-dsn") {
			continue
		}
		if u, err := url.Parse(value); err == nil && u.User != nil {
			out[i] = name + "=" + u.Redacted()
		} else if err != nil || strings.Contains(value, "password") {
			out[i] = name + "=(redacted)"
		}
	}
	return out
}
