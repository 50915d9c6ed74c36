package framework

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"github.com/example/platform-apiserver/test/framework/postgres"
)

// ControlPlane is a running local control plane. Its methods are safe for
// concurrent use.
type ControlPlane struct {
	opts        Options
	workDir     string
	ownsWorkDir bool
	binDir      string
	log         io.Writer // shared, line-prefixed sink for process output; nil for none
	pki         *pki

	databaseURL string
	postgres    *postgres.Instance

	etcd              *process
	etcdURL           string
	apiServer         *process
	apiServerURL      string
	adminConfig       *rest.Config
	adminKubeconfig   string
	controllerManager *process
	scheduler         *process
	sim               *simulator // nil unless Options.StartSimulator

	mu                 sync.Mutex // guards platform, prometheus and kueue
	platform           *process
	prometheus         []*process // StartPrometheus's, stopped first
	kueue              *Kueue     // StartKueue's, stopped first
	platformBinary     string
	platformPort       int
	platformArgs       []string
	platformRegistered bool

	pluginsOnce sync.Once // builds the kubectl plugins (KubectlPlugin)
	pluginsErr  error

	stopOnce sync.Once
	stopErr  error
}

// Start starts etcd, kube-apiserver, optionally kube-controller-manager,
// kube-scheduler and the simulator (kwok and metrics-server), then
// PostgreSQL (unless a database is given) and the platform-apiserver, registers
// the platform API with the aggregator, and returns once kube-apiserver serves
// platform.example.io/v1alpha1. With Options.WithoutPlatform it stops short
// of PostgreSQL and the platform: a bare cluster. On error everything started
// so far is stopped.
func Start(ctx context.Context, opts Options) (_ *ControlPlane, err error) {
	begin := time.Now()
	cp := &ControlPlane{opts: opts}
	if opts.Log != nil {
		cp.log = &syncWriter{w: opts.Log}
	}
	defer func() {
		if err != nil {
			// Keep the logs of a failed start for whoever reads the error.
			if cp.workDir != "" {
				cp.keepWorkDir()
				err = fmt.Errorf("%w (logs in %s)", err, cp.workDir)
			}
			if stopErr := cp.Stop(); stopErr != nil {
				err = fmt.Errorf("%w (and stopping what had started: %w)", err, stopErr)
			}
		}
	}()
	type step struct {
		name string
		run  func(context.Context) error
	}
	steps := []step{
		{"prepare work directory", cp.prepareWorkDir},
		{"resolve binaries", cp.resolveBinaries},
		{"generate PKI", func(context.Context) error {
			p, err := generatePKI(filepath.Join(cp.workDir, "pki"))
			cp.pki = p
			return err
		}},
		{"start etcd", cp.startEtcd},
		{"start kube-apiserver", cp.startKubeAPIServer},
		{"start kube-controller-manager", func(ctx context.Context) error {
			if !opts.StartControllerManager {
				return nil
			}
			return cp.startControllerManager(ctx)
		}},
		{"start kube-scheduler", func(ctx context.Context) error {
			if !opts.StartScheduler {
				return nil
			}
			return cp.startScheduler(ctx)
		}},
		{"start simulator", func(ctx context.Context) error {
			if !opts.StartSimulator {
				return nil
			}
			return cp.startSimulator(ctx)
		}},
	}
	platform := []step{
		{"start database", cp.startDatabase},
		{"start platform-apiserver", func(ctx context.Context) error {
			if err := cp.preparePlatform(); err != nil {
				return err
			}
			return cp.StartPlatformAPIServer(ctx)
		}},
		{"register platform-apiserver", cp.registerPlatform},
		{"wait for the platform API", func(ctx context.Context) error {
			cp.mu.Lock()
			defer cp.mu.Unlock()
			return cp.waitPlatformServed(ctx)
		}},
	}
	if !opts.WithoutPlatform {
		steps = append(steps, platform...)
	}
	for _, s := range steps {
		stepStart := time.Now()
		if err := s.run(ctx); err != nil {
			return nil, fmt.Errorf("control plane: %w", err)
		}
		klog.FromContext(ctx).V(2).Info("Control-plane step done", "step", s.name, "took", time.Since(stepStart).Round(time.Millisecond))
	}
	klog.FromContext(ctx).Info("Control plane ready", "took", time.Since(begin).Round(time.Millisecond),
		"kubeconfig", cp.adminKubeconfig, "workDir", cp.workDir)
	return cp, nil
}

func (cp *ControlPlane) prepareWorkDir(context.Context) error {
	if cp.opts.WorkDir == "" {
		dir, err := os.MkdirTemp("", "platform-controlplane-")
		if err != nil {
			return fmt.Errorf("create temporary work directory: %w", err)
		}
		cp.workDir, cp.ownsWorkDir = dir, true
		return nil
	}
	dir, err := filepath.Abs(cp.opts.WorkDir)
	if err != nil {
		return fmt.Errorf("work directory %q: %w", cp.opts.WorkDir, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create work directory: %w", err)
	}
	cp.workDir = dir
	return nil
}

func (cp *ControlPlane) resolveBinaries(ctx context.Context) error {
	log := cp.log
	if b := cp.opts.BuildLog; b != nil {
		log = b
		if cp.log != nil {
			log = io.MultiWriter(cp.log, b)
		}
	}
	binDir, err := resolveBinDir(ctx, cp.opts.BinDir, log)
	if err != nil {
		return err
	}
	cp.binDir = binDir
	if cp.opts.WithoutPlatform {
		return nil
	}
	cp.platformBinary = cp.opts.PlatformAPIServerBinary
	if cp.platformBinary == "" {
		binary, err := sharedPlatformAPIServer(ctx)
		cp.platformBinary = binary
		return err
	}
	if _, err := os.Stat(cp.platformBinary); err != nil {
		return fmt.Errorf("platform-apiserver binary (Options.PlatformAPIServerBinary): %w", err)
	}
	return nil
}

// startDatabase uses Options.DatabaseURL, else TEST_DATABASE_URL, else starts
// an ephemeral PostgreSQL.
func (cp *ControlPlane) startDatabase(ctx context.Context) error {
	if cp.databaseURL = cp.opts.DatabaseURL; cp.databaseURL != "" {
		return nil
	}
	if cp.databaseURL = os.Getenv(postgres.EnvDatabaseURL); cp.databaseURL != "" {
		klog.FromContext(ctx).Info("Using the database named by the environment", "variable", postgres.EnvDatabaseURL)
		return nil
	}
	inst, err := postgres.Start(ctx, postgres.Options{})
	if err != nil {
		return fmt.Errorf("start PostgreSQL (or set %s / Options.DatabaseURL): %w", postgres.EnvDatabaseURL, err)
	}
	cp.postgres = inst
	cp.databaseURL = inst.DSN()
	klog.FromContext(ctx).Info("Started PostgreSQL", "dsn", cp.databaseURL)
	return nil
}

// startComponent starts one process with its output in <workdir>/<name>.log
// (and Options.Log) and waits until ready succeeds; on failure the process is
// stopped.
func (cp *ControlPlane) startComponent(ctx context.Context, name, path string, args []string, timeout time.Duration, ready func(context.Context) error) (*process, error) {
	var extra []io.Writer
	if cp.log != nil {
		extra = append(extra, newPrefixWriter(name, cp.log))
	}
	if name == "platform-apiserver" && cp.opts.PlatformAPIServerLog != nil {
		extra = append(extra, cp.opts.PlatformAPIServerLog)
	}
	spec := processSpec{name: name, path: path, args: args, dir: cp.workDir, logDir: cp.workDir}
	if len(extra) > 0 {
		spec.extra = io.MultiWriter(extra...)
	}
	p, err := startProcess(ctx, spec)
	if err != nil {
		return nil, err
	}
	if err := p.waitReady(ctx, timeout, ready); err != nil {
		if stopErr := p.stop(); stopErr != nil {
			err = errors.Join(err, stopErr)
		}
		return nil, err
	}
	return p, nil
}

// Stop stops everything Start started, in reverse order, and removes the work
// directory if Start created it. It is safe to call more than once.
func (cp *ControlPlane) Stop() error {
	cp.stopOnce.Do(func() {
		var errs []error
		cp.mu.Lock()
		procs := append(append([]*process(nil), cp.prometheus...), cp.platform)
		kueue := cp.kueue
		cp.mu.Unlock()
		if kueue != nil {
			if err := kueue.Stop(); err != nil {
				errs = append(errs, err)
			}
		}
		if cp.sim != nil {
			procs = append(procs, cp.sim.metricsServer, cp.sim.kwok)
		}
		procs = append(procs, cp.scheduler, cp.controllerManager, cp.apiServer, cp.etcd)
		for _, p := range procs {
			if p != nil {
				if err := p.stop(); err != nil {
					errs = append(errs, err)
				}
			}
		}
		if cp.postgres != nil {
			if err := cp.postgres.Stop(); err != nil {
				errs = append(errs, fmt.Errorf("stop PostgreSQL: %w", err))
			}
		}
		if cp.ownsWorkDir && len(errs) == 0 {
			if err := os.RemoveAll(cp.workDir); err != nil {
				errs = append(errs, fmt.Errorf("remove work directory: %w", err))
			}
		}
		cp.stopErr = errors.Join(errs...)
	})
	return cp.stopErr
}

// keepWorkDir stops Stop from removing a temporary work directory, so the
// logs of a failed test survive.
func (cp *ControlPlane) keepWorkDir() { cp.ownsWorkDir = false }

// WorkDir returns the directory holding PKI, kubeconfigs and process logs.
func (cp *ControlPlane) WorkDir() string { return cp.workDir }

// BinDir returns the directory of etcd, kube-apiserver, kube-controller-manager and kubectl.
func (cp *ControlPlane) BinDir() string { return cp.binDir }

// AdminKubeconfig returns the path of a kubeconfig for user admin in group system:masters.
func (cp *ControlPlane) AdminKubeconfig() string { return cp.adminKubeconfig }

// AdminConfig returns a fresh rest.Config for user admin in group system:masters.
func (cp *ControlPlane) AdminConfig() *rest.Config { return rest.CopyConfig(cp.adminConfig) }

// KubeAPIServerURL returns kube-apiserver's https URL.
func (cp *ControlPlane) KubeAPIServerURL() string { return cp.apiServerURL }

// DatabaseURL returns the PostgreSQL DSN the platform-apiserver uses.
func (cp *ControlPlane) DatabaseURL() string { return cp.databaseURL }

// PlatformServerURL returns the platform-apiserver's own https URL, for tests
// that bypass the aggregator; it trusts PlatformServingCA.
func (cp *ControlPlane) PlatformServerURL() string {
	return "https://127.0.0.1:" + strconv.Itoa(cp.platformPort)
}

// PlatformServingCA returns the PEM CA that signed the platform-apiserver's
// serving certificate (the APIService's caBundle).
func (cp *ControlPlane) PlatformServingCA() []byte {
	return append([]byte(nil), cp.pki.platformCA.certPEM...)
}

// PlatformAPIServerLogPath returns the file the platform-apiserver's output goes to.
func (cp *ControlPlane) PlatformAPIServerLogPath() string {
	return filepath.Join(cp.workDir, "platform-apiserver.log")
}

// componentServingArgs are the flags a control-plane component (a
// kube-controller-manager, kube-scheduler or metrics-server) needs to talk to
// kube-apiserver as the admin and serve on loopback port with serving's
// certificate.
func (cp *ControlPlane) componentServingArgs(port int, serving *keyPair) []string {
	return []string{
		"--kubeconfig=" + cp.adminKubeconfig,
		"--authentication-kubeconfig=" + cp.adminKubeconfig,
		"--authorization-kubeconfig=" + cp.adminKubeconfig,
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(port),
		"--tls-cert-file=" + serving.certFile,
		"--tls-private-key-file=" + serving.keyFile,
	}
}
