package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/example/platform-apiserver/pkg/generated/clientset/versioned"
	registrypostgres "github.com/example/platform-apiserver/pkg/registry/postgres"
	"github.com/example/platform-apiserver/test/framework"
	"github.com/example/platform-apiserver/test/framework/postgres"
)

const (
	setupTimeout      = 30 * time.Minute // starting and seeding, a first tools build included
	clientTimeout     = 2 * time.Minute
	envPlatformBinary = "PLATFORM_APISERVER_BINARY" // a prebuilt platform-apiserver
)

// envOptions is what differs between the benchmarks' environments.
type envOptions struct {
	name         string   // of the work directory and the log
	platformArgs []string // appended to the platform-apiserver's flags
	memberDir    bool     // an empty --member-kubeconfig-dir (env.memberDir)
	simulator    bool     // kwok and metrics-server
	standby      bool     // a streaming standby; the DSN names both, read-write
	stopPlatform bool     // stop the framework's platform-apiserver once started
	pgSettings   []string // PostgreSQL's further settings (postgres.Options.Settings)
	prepare      func(context.Context, *env) error
}

// env is a running control plane on an ephemeral PostgreSQL, and its clients.
type env struct {
	workDir   string
	memberDir string
	pg        *postgres.Instance
	standby   *postgres.Standby
	cp        *framework.ControlPlane

	kube     kubernetes.Interface // kube-apiserver, JSON
	platform versioned.Interface  // platform.example.io through kube-apiserver's aggregator, JSON
	direct   versioned.Interface  // the platform-apiserver's own port, bypassing the aggregator, JSON

	registry *registrypostgres.Store // writes as discovery does
	db       *pgxpool.Pool
	seededAt time.Time // the seed's clock, so later writes change only what they mean to
	flips    int       // the watch benchmark's changes
	kubePID  int

	kubectlPath  string
	kubectlFlags []string
	cleanups     []func() error // run first in stop, last added first
}

// startEnv starts PostgreSQL (never TEST_DATABASE_URL) and a control plane,
// builds the clients, opens the registry and runs opts.prepare. On error the
// env, when non-nil, holds what started.
func startEnv(ctx context.Context, opts envOptions) (*env, error) {
	ctx, cancel := context.WithTimeout(ctx, setupTimeout)
	defer cancel()
	workDir, err := os.MkdirTemp("", strings.TrimSuffix("platform-bench-"+opts.name, "-")+"-")
	if err != nil {
		return nil, fmt.Errorf("create work directory: %w", err)
	}
	e := &env{workDir: workDir}
	args := opts.platformArgs
	if opts.memberDir {
		e.memberDir = filepath.Join(workDir, "members")
		if err := os.MkdirAll(e.memberDir, 0o755); err != nil {
			return e, err
		}
		args = append(slices.Clone(args), "--member-kubeconfig-dir="+e.memberDir)
	}
	if e.pg, err = postgres.Start(ctx, postgres.Options{Settings: opts.pgSettings}); err != nil {
		return e, fmt.Errorf("start PostgreSQL: %w", err)
	}
	dsn := e.pg.DSN()
	if opts.standby {
		if e.standby, err = e.pg.StartStandby(ctx, postgres.StandbyOptions{}); err != nil {
			return e, err
		}
		dsn = postgres.MultiHostDSN("", "read-write", e.pg, e.standby.Instance)
	}
	e.cp, err = framework.Start(ctx, framework.Options{
		WorkDir:                 filepath.Join(workDir, "controlplane"),
		DatabaseURL:             dsn,
		PlatformAPIServerBinary: os.Getenv(envPlatformBinary),
		ExtraPlatformArgs:       args,
		StartSimulator:          opts.simulator,
	})
	if err != nil {
		return e, err
	}
	// The framework's configs are valid: NewForConfig fails on none.
	e.kube = kubernetes.NewForConfigOrDie(jsonConfig(e.cp.AdminConfig()))
	e.platform = versioned.NewForConfigOrDie(jsonConfig(e.cp.AdminConfig()))
	e.direct = versioned.NewForConfigOrDie(jsonConfig(e.cp.PlatformDirectConfig()))
	e.kubectlPath = filepath.Join(e.cp.BinDir(), "kubectl")
	e.kubectlFlags = []string{
		"--kubeconfig=" + e.cp.AdminKubeconfig(),
		// One discovery cache, warmed by the first call, as a user's.
		"--cache-dir=" + filepath.Join(e.workDir, "kubectl-cache"),
	}
	if e.registry, err = registrypostgres.Open(ctx, dsn, registrypostgres.Options{}); err != nil {
		return e, fmt.Errorf("open registry: %w", err)
	}
	if e.db, err = pgxpool.New(ctx, dsn); err != nil {
		return e, fmt.Errorf("connect to the registry database: %w", err)
	}
	if opts.stopPlatform {
		if err := e.cp.StopPlatformAPIServer(); err != nil {
			return e, err
		}
	}
	if opts.prepare != nil {
		if err := opts.prepare(ctx, e); err != nil {
			return e, fmt.Errorf("seed: %w", err)
		}
	}
	return e, nil
}

// benchEnv starts an environment of b's own, stopped when b ends.
func benchEnv(b *testing.B, opts envOptions) *env {
	b.Helper()
	begin := time.Now()
	e, err := startEnv(context.Background(), opts)
	if e != nil {
		b.Cleanup(func() {
			if err := e.stop(b.Failed()); err != nil {
				b.Errorf("stop %s environment: %v", opts.name, err)
			}
		})
	}
	if err != nil {
		b.Fatalf("%s environment: %v", opts.name, err)
	}
	fmt.Fprintf(os.Stderr, "%s environment ready in %s\n", opts.name, time.Since(begin).Round(time.Second))
	return e
}

// jsonConfig makes cfg speak JSON and never throttle client-side.
func jsonConfig(cfg *rest.Config) *rest.Config {
	cfg.ContentType = runtime.ContentTypeJSON
	cfg.AcceptContentTypes = runtime.ContentTypeJSON
	cfg.QPS = -1 // negative: no client-side rate limiter
	cfg.Timeout = clientTimeout
	return cfg
}

func (e *env) kubectl(ctx context.Context, out io.Writer, args ...string) error {
	cmd := exec.CommandContext(ctx, e.kubectlPath, slices.Concat(e.kubectlFlags, args)...)
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = out, &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return nil
}

func (e *env) platformPID() (int, error) {
	if pid := e.cp.PlatformAPIServerPID(); pid != 0 {
		return pid, nil
	}
	return 0, errors.New("platform-apiserver is not running")
}

// platformMemory returns the platform-apiserver's VmRSS and VmHWM in bytes.
func (e *env) platformMemory() (rss, hwm int64, err error) {
	pid, err := e.platformPID()
	if err != nil {
		return 0, 0, err
	}
	return processMemory(pid)
}

// platformCPU is the platform-apiserver's mean cores over the next window.
func (e *env) platformCPU(ctx context.Context, window time.Duration) (float64, error) {
	pid, err := e.platformPID()
	if err != nil {
		return 0, err
	}
	before, err := processCPUTime(pid)
	if err != nil {
		return 0, err
	}
	begin := time.Now()
	if err := sleepCtx(ctx, window); err != nil {
		return 0, err
	}
	after, err := processCPUTime(pid)
	return float64(after-before) / float64(time.Since(begin)), err
}

// expectWatches checks that the platform-apiserver serves n NodeCapacity watches.
func (e *env) expectWatches(ctx context.Context, n int) error {
	body, err := e.cp.PlatformMetrics(ctx)
	if err != nil {
		return err
	}
	if !strings.Contains(body, "apiserver_longrunning_requests") {
		return errors.New("platform-apiserver metrics lack apiserver_longrunning_requests")
	}
	serving, err := framework.MetricSum(body, "apiserver_longrunning_requests", `resource="nodecapacities"`, `verb="WATCH"`)
	if err == nil && int(serving) != n {
		err = fmt.Errorf("platform-apiserver serves %d NodeCapacity watches, want %d", int(serving), n)
	}
	return err
}

// kubeAPIServerPID finds this environment's kube-apiserver in /proc: the
// process of that name whose arguments name the work directory.
func (e *env) kubeAPIServerPID() (int, error) {
	if e.kubePID != 0 {
		return e.kubePID, nil
	}
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		cmdline, _ := os.ReadFile(filepath.Join("/proc", d.Name(), "cmdline")) // gone, or not ours to read
		args := strings.Split(string(cmdline), "\x00")
		if err == nil && filepath.Base(args[0]) == "kube-apiserver" && strings.Contains(string(cmdline), e.workDir+string(filepath.Separator)) {
			e.kubePID = pid
			return pid, nil
		}
	}
	return 0, fmt.Errorf("no kube-apiserver process with arguments under %s", e.workDir)
}

// stop stops everything and removes the work directory unless keepLogs.
func (e *env) stop(keepLogs bool) error {
	var errs []error
	for _, f := range slices.Backward(e.cleanups) {
		errs = append(errs, f())
	}
	if e.db != nil {
		e.db.Close()
	}
	if e.registry != nil {
		e.registry.Close()
	}
	if e.cp != nil {
		if err := e.cp.Stop(); err != nil {
			errs = append(errs, fmt.Errorf("stop control plane: %w", err))
		}
	}
	if e.standby != nil {
		if err := e.standby.Stop(); err != nil {
			errs = append(errs, fmt.Errorf("stop the standby: %w", err))
		}
	}
	if e.pg != nil {
		if err := e.pg.Stop(); err != nil {
			errs = append(errs, fmt.Errorf("stop PostgreSQL: %w", err))
		}
	}
	if keepLogs || len(errs) > 0 {
		fmt.Fprintf(os.Stderr, "benchmark work directory (process logs) kept in %s\n", e.workDir)
	} else if err := os.RemoveAll(e.workDir); err != nil {
		errs = append(errs, fmt.Errorf("remove work directory: %w", err))
	}
	return errors.Join(errs...)
}

// sleepCtx waits d, or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) error {
	select {
	case <-time.After(d):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// every calls f once a tick of interval: n times, the first at once, or
// with n < 0 until ctx ends, each after a tick. It returns f's first error
// or ctx's.
func every(ctx context.Context, interval time.Duration, n int, f func() error) error {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for k := 0; n < 0 || k < n; k++ {
		if k > 0 || n < 0 {
			select {
			case <-tick.C:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		if err := f(); err != nil {
			return err
		}
	}
	return nil
}
