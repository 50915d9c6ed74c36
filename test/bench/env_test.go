package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/example/platform-apiserver/pkg/generated/clientset/versioned"
	registrypostgres "github.com/example/platform-apiserver/pkg/registry/postgres"
	"github.com/example/platform-apiserver/test/framework"
	"github.com/example/platform-apiserver/test/framework/postgres"
)

const (
	// setupTimeout bounds starting and seeding the environment, including a
	// first build of the control-plane binaries by hack/build-tools.sh.
	setupTimeout = 30 * time.Minute
	// clientTimeout bounds one request of the benchmark's clients.
	clientTimeout = 2 * time.Minute
	// envPlatformBinary names a prebuilt platform-apiserver to benchmark
	// instead of building ./cmd/apiserver.
	envPlatformBinary = "PLATFORM_APISERVER_BINARY"
)

// env is the running control plane, seeded with nodeCount Nodes in
// kube-apiserver and nodeCount nodes in the registry, and its clients.
type env struct {
	workDir string
	pg      *postgres.Instance
	cp      *framework.ControlPlane

	kube     kubernetes.Interface // kube-apiserver, JSON
	platform versioned.Interface  // platform.example.io through kube-apiserver's aggregator, JSON
	direct   versioned.Interface  // the platform-apiserver's own port, bypassing the aggregator, JSON

	// registry writes to the platform-apiserver's PostgreSQL through the
	// store, as discovery does: the seed, and the watch benchmark's changes.
	registry *registrypostgres.Store
	// seededAt is the clock the seed used, so later writes of a seeded
	// node change only what they mean to.
	seededAt time.Time
	// flips counts the changes the watch benchmark has committed; the next
	// one is labelled with it.
	flips int
	// kubePID caches kubeAPIServerPID.
	kubePID int

	kubectlPath  string
	kubectlFlags []string

	results results
}

// startEnv starts PostgreSQL and the control plane and seeds both sides.
// It always uses an ephemeral PostgreSQL (never TEST_DATABASE_URL), so the
// numbers do not depend on a shared server and nothing shared is written.
// On error the returned env, when non-nil, holds whatever started, for stop.
func startEnv(ctx context.Context) (*env, error) {
	ctx, cancel := context.WithTimeout(ctx, setupTimeout)
	defer cancel()
	e, err := startControlPlane(ctx, controlPlaneOptions{workDirPrefix: "platform-bench-"})
	if err != nil {
		return e, err
	}
	if err := e.seed(ctx); err != nil {
		return e, fmt.Errorf("seed: %w", err)
	}
	return e, nil
}

// controlPlaneOptions is what differs between the benchmarks' environments.
type controlPlaneOptions struct {
	// workDirPrefix names the work directory (os.MkdirTemp's pattern).
	workDirPrefix string
	// extraPlatformArgs are appended to the platform-apiserver's flags.
	extraPlatformArgs []string
}

// startControlPlane starts an ephemeral PostgreSQL and a control plane on
// it, builds the clients and opens the registry, seeding nothing. On error
// the returned env, when non-nil, holds whatever started, for stop.
func startControlPlane(ctx context.Context, opts controlPlaneOptions) (*env, error) {
	workDir, err := os.MkdirTemp("", opts.workDirPrefix)
	if err != nil {
		return nil, fmt.Errorf("create work directory: %w", err)
	}
	e := &env{workDir: workDir}
	if e.pg, err = postgres.Start(ctx, postgres.Options{}); err != nil {
		return e, fmt.Errorf("start PostgreSQL: %w", err)
	}
	e.cp, err = framework.Start(ctx, framework.Options{
		WorkDir:                 filepath.Join(workDir, "controlplane"),
		DatabaseURL:             e.pg.DSN(),
		PlatformAPIServerBinary: os.Getenv(envPlatformBinary),
		ExtraPlatformArgs:       opts.extraPlatformArgs,
	})
	if err != nil {
		return e, err
	}
	if err := e.buildClients(); err != nil {
		return e, err
	}
	if e.registry, err = registrypostgres.Open(ctx, e.cp.DatabaseURL(), registrypostgres.Options{}); err != nil {
		return e, fmt.Errorf("open registry: %w", err)
	}
	return e, nil
}

func (e *env) buildClients() error {
	var err error
	if e.kube, err = kubernetes.NewForConfig(jsonConfig(e.cp.AdminConfig())); err != nil {
		return fmt.Errorf("kube-apiserver client: %w", err)
	}
	if e.platform, err = versioned.NewForConfig(jsonConfig(e.cp.AdminConfig())); err != nil {
		return fmt.Errorf("aggregated platform client: %w", err)
	}
	direct := jsonConfig(e.cp.AdminConfig())
	direct.Host = e.cp.PlatformServerURL()
	direct.CAFile, direct.CAData = "", e.cp.PlatformServingCA()
	if e.direct, err = versioned.NewForConfig(direct); err != nil {
		return fmt.Errorf("direct platform client: %w", err)
	}
	e.kubectlPath = filepath.Join(e.cp.BinDir(), "kubectl")
	e.kubectlFlags = []string{
		"--kubeconfig=" + e.cp.AdminKubeconfig(),
		// One discovery cache for every call, warmed by the first, so each
		// timed call pays for discovery as a user's warm kubectl does.
		"--cache-dir=" + filepath.Join(e.workDir, "kubectl-cache"),
	}
	return nil
}

// jsonConfig makes cfg speak JSON both ways and never throttle client-side,
// so the benchmarks compare the servers, not client-go's rate limiter.
func jsonConfig(cfg *rest.Config) *rest.Config {
	cfg.ContentType = runtime.ContentTypeJSON
	cfg.AcceptContentTypes = runtime.ContentTypeJSON
	cfg.QPS = -1 // negative: no client-side rate limiter
	cfg.Timeout = clientTimeout
	return cfg
}

// kubectl runs the built kubectl as admin with stdout going to out.
func (e *env) kubectl(ctx context.Context, out io.Writer, args ...string) error {
	cmd := exec.CommandContext(ctx, e.kubectlPath, slices.Concat(e.kubectlFlags, args)...)
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = out, &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return nil
}

// platformMemory returns the platform-apiserver's current and peak resident
// set size in bytes.
func (e *env) platformMemory() (rss, hwm int64, err error) {
	pid := e.cp.PlatformAPIServerPID()
	if pid == 0 {
		return 0, 0, errors.New("platform-apiserver is not running")
	}
	return processMemory(pid)
}

// platformCPU returns how many cores the platform-apiserver used on average
// (user plus system CPU time over wall time) during the next window.
func (e *env) platformCPU(ctx context.Context, window time.Duration) (float64, error) {
	pid := e.cp.PlatformAPIServerPID()
	if pid == 0 {
		return 0, errors.New("platform-apiserver is not running")
	}
	before, err := processCPUTime(pid)
	if err != nil {
		return 0, err
	}
	begin := time.Now()
	select {
	case <-time.After(window):
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	after, err := processCPUTime(pid)
	if err != nil {
		return 0, err
	}
	return float64(after-before) / float64(time.Since(begin)), nil
}

// platformWatches returns how many NodeCapacity watches the platform-apiserver
// is serving, from its apiserver_longrunning_requests gauge.
func (e *env) platformWatches(ctx context.Context) (int, error) {
	body, err := e.cp.PlatformMetrics(ctx)
	if err != nil {
		return 0, err
	}
	if !strings.Contains(body, "apiserver_longrunning_requests") {
		return 0, errors.New("platform-apiserver metrics lack apiserver_longrunning_requests")
	}
	n, err := framework.MetricSum(body, "apiserver_longrunning_requests", `resource="nodecapacities"`, `verb="WATCH"`)
	return int(n), err
}

// kubeAPIServerPID finds the pid of this environment's kube-apiserver, which
// the framework does not expose: the kube-apiserver process whose arguments
// name this environment's work directory.
func (e *env) kubeAPIServerPID() (int, error) {
	if e.kubePID != 0 {
		return e.kubePID, nil
	}
	dirs, err := os.ReadDir("/proc")
	if err != nil {
		return 0, fmt.Errorf("find kube-apiserver: %w", err)
	}
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", d.Name(), "cmdline"))
		if err != nil {
			continue // gone, or not ours to read
		}
		args := strings.Split(string(cmdline), "\x00")
		if filepath.Base(args[0]) == "kube-apiserver" && strings.Contains(string(cmdline), e.workDir+string(filepath.Separator)) {
			e.kubePID = pid
			return pid, nil
		}
	}
	return 0, fmt.Errorf("no kube-apiserver process with arguments under %s", e.workDir)
}

// connectionCounts describes how many TCP connections kube-apiserver and the
// platform-apiserver are serving, for the log.
func (e *env) connectionCounts() string {
	count := func(serverURL string) string {
		u, err := url.Parse(serverURL)
		if err != nil {
			return err.Error()
		}
		port, err := strconv.Atoi(u.Port())
		if err != nil {
			return err.Error()
		}
		n, err := establishedConnections(port)
		if err != nil {
			return err.Error()
		}
		return strconv.Itoa(n)
	}
	return fmt.Sprintf("TCP connections served: kube-apiserver %s, platform-apiserver %s",
		count(e.cp.KubeAPIServerURL()), count(e.cp.PlatformServerURL()))
}

// stop stops everything startEnv started and removes the work directory
// unless keepLogs is set, in which case it names it.
func (e *env) stop(keepLogs bool) error {
	var errs []error
	if e.registry != nil {
		e.registry.Close()
	}
	if e.cp != nil {
		if err := e.cp.Stop(); err != nil {
			errs = append(errs, fmt.Errorf("stop control plane: %w", err))
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
