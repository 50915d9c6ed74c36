package framework

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	configv1alpha1 "k8s.io/component-base/config/v1alpha1"
	"k8s.io/klog/v2"
	configapi "sigs.k8s.io/kueue/apis/config/v1beta2"
	"sigs.k8s.io/yaml"
)

// Kueue's manager (hack/tools/kueue pins it), run out of cluster against a
// ControlPlane with the admin kubeconfig, so RBAC does not apply. Without
// Kueue's webhooks (nothing registers them here), whoever creates a Job
// does what they would: suspend it, label it with its LocalQueue
// (KueueQueueNameLabel) and, for MultiKueue, set spec.managedBy to
// MultiKueueManagedBy (MultiKueueJob does all three).

const (
	// KueueNamespace is Kueue's own namespace: MultiKueue reads the
	// workers' kubeconfig Secrets from it.
	KueueNamespace = "kueue-system"
	// KueueQueueNameLabel names a Job's LocalQueue.
	KueueQueueNameLabel = "kueue.x-k8s.io/queue-name"
	// KueueAllAtOnceDispatcher is MultiKueue's default dispatcher, which
	// nominates every worker at once.
	KueueAllAtOnceDispatcher = configapi.MultiKueueDispatcherModeAllAtOnce

	kueueModule       = "sigs.k8s.io/kueue"
	kueueStartTimeout = 2 * time.Minute
	// kueueMetricsCertDir is where Kueue v0.17 reads its metrics server's
	// certificate when internal cert management is off: the path is fixed
	// in cmd/kueue/main.go, and the manager exits without the files.
	kueueMetricsCertDir = "/etc/kueue/metrics/certs"
)

// KueueOptions configures StartKueue and Restart.
type KueueOptions struct {
	// DispatcherName is MultiKueue's multiKueue.dispatcherName. Empty means
	// KueueAllAtOnceDispatcher; any other name than Kueue's own two leaves
	// a Workload's status.nominatedClusterNames to an external dispatcher,
	// and MultiKueue creates remote Workloads only on the workers named there.
	DispatcherName string
	// GCInterval is how often MultiKueue deletes remote objects whose
	// Workload on the manager is gone. Zero means 5 seconds.
	GCInterval time.Duration
	// FeatureGates are set on top of the harness's own (VisibilityOnDemand
	// off: its API server would need a port and an APIService).
	FeatureGates map[string]bool
	// LogLevel is the manager's log verbosity (--zap-log-level). Zero means
	// 2; MultiKueue's per-workload decisions are at 3 and 4.
	LogLevel int
}

// Kueue is a running Kueue manager. Its methods are safe for concurrent use.
type Kueue struct {
	cp     *ControlPlane
	binary string
	dir    string // config and webhook certificate
	// Fixed at the first start, so a restart serves on the same ports.
	metricsPort, healthPort, webhookPort int

	mu   sync.Mutex
	opts KueueOptions
	proc *process
}

// StartKueue installs Kueue's CRDs and namespace on the cluster and starts
// Kueue's manager against it (batch/job integration, MultiKueue with
// opts.DispatcherName), waiting until it is ready. The kueue binary comes
// from BinDir, else from hack/build-tools.sh kueue (about 4 minutes the
// first time on this machine). ControlPlane.Stop stops it too.
func (cp *ControlPlane) StartKueue(ctx context.Context, opts KueueOptions) (*Kueue, error) {
	cp.mu.Lock()
	running := cp.kueue != nil
	cp.mu.Unlock()
	if running {
		return nil, errors.New("start Kueue: already started on this control plane")
	}
	binary, err := cp.kueueBinary(ctx)
	if err != nil {
		return nil, err
	}
	if err := cp.InstallKueueCRDs(ctx); err != nil {
		return nil, err
	}
	if err := cp.ensureNamespace(ctx, KueueNamespace); err != nil {
		return nil, err
	}
	if err := ensureKueueMetricsCert(); err != nil {
		return nil, err
	}
	k := &Kueue{cp: cp, binary: binary, dir: filepath.Join(cp.workDir, "kueue"), opts: opts}
	if err := k.prepare(); err != nil {
		return nil, err
	}
	if err := k.start(ctx); err != nil {
		return nil, err
	}
	cp.mu.Lock()
	cp.kueue = k
	cp.mu.Unlock()
	return k, nil
}

// Restart stops the manager and starts it again with opts (another
// dispatcher, say), on the same ports and log file.
func (k *Kueue) Restart(ctx context.Context, opts KueueOptions) error {
	if err := k.Stop(); err != nil {
		return err
	}
	k.mu.Lock()
	k.opts = opts
	k.mu.Unlock()
	return k.start(ctx)
}

// Stop stops the manager (SIGTERM, then SIGKILL after a grace period). It
// is safe to call more than once.
func (k *Kueue) Stop() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.proc == nil {
		return nil
	}
	err := k.proc.stop()
	k.proc = nil
	return err
}

// LogPath returns the file the manager's output goes to (every start's).
func (k *Kueue) LogPath() string { return filepath.Join(k.cp.workDir, "kueue.log") }

// MetricsPort is the port of the manager's Prometheus metrics on 127.0.0.1
// (https, a self-signed certificate, /metrics behind Kubernetes authn/authz).
func (k *Kueue) MetricsPort() int { return k.metricsPort }

// HealthPort is the port of the manager's /healthz and /readyz on
// 127.0.0.1 (plain http).
func (k *Kueue) HealthPort() int { return k.healthPort }

// prepare picks the ports and writes the webhook server's certificate.
func (k *Kueue) prepare() error {
	ports, err := freePorts(3)
	if err != nil {
		return err
	}
	k.metricsPort, k.healthPort, k.webhookPort = ports[0], ports[1], ports[2]
	// No webhook configuration points at it, but the manager serves its
	// webhooks and is not ready until it does.
	cert, err := IssueServingCert("kueue-webhook-service." + KueueNamespace + ".svc")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(k.dir, 0o755); err != nil {
		return err
	}
	return writeFiles(k.dir, map[string][]byte{"tls.crt": cert.CertPEM, "tls.key": cert.KeyPEM})
}

// start writes the configuration for k.opts and starts the manager.
func (k *Kueue) start(ctx context.Context) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	config, err := k.configuration()
	if err != nil {
		return err
	}
	configPath := filepath.Join(k.dir, "config.yaml")
	if err := os.WriteFile(configPath, config, 0o644); err != nil {
		return fmt.Errorf("write Kueue configuration: %w", err)
	}
	args := []string{
		"--config=" + configPath,
		"--kubeconfig=" + k.cp.adminKubeconfig,
		"--zap-log-level=" + strconv.Itoa(cmp.Or(k.opts.LogLevel, 2)),
		"--zap-devel=false",
	}
	proc, err := k.cp.startComponent(ctx, "kueue", k.binary, args, kueueStartTimeout,
		httpCheck("http://127.0.0.1:"+strconv.Itoa(k.healthPort)+"/readyz", nil))
	if err != nil {
		return fmt.Errorf("start Kueue: %w", err)
	}
	k.proc = proc
	klog.FromContext(ctx).Info("Kueue ready", "dispatcher", k.dispatcherName(), "log", k.LogPath())
	return nil
}

func (k *Kueue) dispatcherName() string {
	return cmp.Or(k.opts.DispatcherName, KueueAllAtOnceDispatcher)
}

// configuration is the manager's Configuration file: everything on
// loopback, no leader election, no internal certificate management (no
// Service or webhook configurations to inject into), Jobs only.
func (k *Kueue) configuration() ([]byte, error) {
	gates := map[string]bool{"VisibilityOnDemand": false}
	maps.Copy(gates, k.opts.FeatureGates)
	addr := func(port int) string { return "127.0.0.1:" + strconv.Itoa(port) }
	cfg := configapi.Configuration{
		TypeMeta:  metav1.TypeMeta{APIVersion: configapi.GroupVersion.String(), Kind: "Configuration"},
		Namespace: new(KueueNamespace),
		ControllerManager: configapi.ControllerManager{
			Webhook:        configapi.ControllerWebhook{Host: "127.0.0.1", Port: new(k.webhookPort), CertDir: k.dir},
			LeaderElection: &configv1alpha1.LeaderElectionConfiguration{LeaderElect: new(false)},
			Metrics:        configapi.ControllerMetrics{BindAddress: addr(k.metricsPort)},
			Health:         configapi.ControllerHealth{HealthProbeBindAddress: addr(k.healthPort)},
		},
		InternalCertManagement: &configapi.InternalCertManagement{Enable: new(false)},
		ClientConnection:       &configapi.ClientConnection{QPS: new(float32(50)), Burst: new(int32(100))},
		Integrations:           &configapi.Integrations{Frameworks: []string{"batch/job"}},
		MultiKueue: &configapi.MultiKueue{
			GCInterval:     &metav1.Duration{Duration: cmp.Or(k.opts.GCInterval, 5*time.Second)},
			DispatcherName: new(k.dispatcherName()),
		},
		FeatureGates: gates,
	}
	out, err := yaml.Marshal(cfg)
	if err != nil {
		return nil, fmt.Errorf("encode Kueue configuration: %w", err)
	}
	return out, nil
}

// kueueBinary returns BinDir's kueue, built by hack/build-tools.sh kueue
// when missing.
func (cp *ControlPlane) kueueBinary(ctx context.Context) (string, error) {
	binary := filepath.Join(cp.binDir, "kueue")
	if _, err := os.Stat(binary); err == nil {
		return binary, nil
	}
	root, err := ModuleRoot()
	if err != nil {
		return "", err
	}
	klog.FromContext(ctx).Info("Building Kueue's manager (about 4 minutes the first time)", "script", "hack/build-tools.sh kueue")
	cmd := exec.CommandContext(ctx, "bash", filepath.Join(root, "hack", "build-tools.sh"), "kueue")
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("hack/build-tools.sh kueue: %w\n%s", err, stderr.String())
	}
	return filepath.Join(strings.TrimSpace(string(out)), "kueue"), nil
}

// InstallKueueCRDs installs the CRDs of the pinned Kueue (all of
// config/components/crd/bases, without conversion webhooks: every client
// here speaks the storage version v1beta2) and waits until they are
// Established.
func (cp *ControlPlane) InstallKueueCRDs(ctx context.Context) error {
	version, sum, err := kueuePin()
	if err != nil {
		return err
	}
	return cp.InstallCRDs(ctx, []UpstreamCRD{{kueueModule, version, sum, "config/components/crd/bases"}})
}

// kueuePin returns the version and go.sum hash of Kueue that
// hack/tools/kueue pins (the binary's), after checking that this test
// binary's Kueue API types are the same version.
func kueuePin() (version, sum string, err error) {
	root, err := ModuleRoot()
	if err != nil {
		return "", "", err
	}
	dir := filepath.Join(root, "hack", "tools", "kueue")
	version, err = findField(filepath.Join(dir, "go.mod"), func(f []string) string {
		if len(f) >= 2 && f[0] == kueueModule {
			return f[1]
		}
		return ""
	})
	if err != nil {
		return "", "", err
	}
	sum, err = findField(filepath.Join(dir, "go.sum"), func(f []string) string {
		if len(f) == 3 && f[0] == kueueModule && f[1] == version {
			return f[2]
		}
		return ""
	})
	if err != nil {
		return "", "", err
	}
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, d := range info.Deps {
			if d.Path == kueueModule && d.Version != version {
				return "", "", fmt.Errorf("hack/tools/kueue pins Kueue %s but this module's go.mod requires %s: bump both", version, d.Version)
			}
		}
	}
	return version, sum, nil
}

// findField returns the first non-empty pick of a line's fields in file.
func findField(file string, pick func([]string) string) (string, error) {
	f, err := os.Open(file)
	if err != nil {
		return "", err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if v := pick(strings.Fields(strings.TrimPrefix(strings.TrimSpace(s.Text()), "require "))); v != "" {
			return v, nil
		}
	}
	if err := s.Err(); err != nil {
		return "", err
	}
	return "", fmt.Errorf("%s: no %s line", file, kueueModule)
}

// kueueMetricsCertMu serialises this process's writers of
// kueueMetricsCertDir; other processes are kept out by the rename.
var kueueMetricsCertMu sync.Mutex

// ensureKueueMetricsCert puts a self-signed certificate in
// kueueMetricsCertDir unless one is there. Every Kueue on the machine shares
// it; the directory is renamed into place whole, so a reader never sees a
// certificate without its key.
func ensureKueueMetricsCert() error {
	kueueMetricsCertMu.Lock()
	defer kueueMetricsCertMu.Unlock()
	if _, err := os.Stat(filepath.Join(kueueMetricsCertDir, "tls.key")); err == nil {
		return nil
	}
	parent := filepath.Dir(kueueMetricsCertDir)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return fmt.Errorf("create %s, where Kueue reads its metrics certificate (internal cert management off): %w", parent, err)
	}
	tmp, err := os.MkdirTemp(parent, ".certs-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	cert, err := IssueServingCert("localhost")
	if err != nil {
		return err
	}
	if err := writeFiles(tmp, map[string][]byte{"tls.crt": cert.CertPEM, "tls.key": cert.KeyPEM}); err != nil {
		return err
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return err
	}
	if err := os.Rename(tmp, kueueMetricsCertDir); err != nil {
		if _, statErr := os.Stat(filepath.Join(kueueMetricsCertDir, "tls.key")); statErr == nil {
			return nil // another process was first
		}
		return fmt.Errorf("install Kueue's metrics certificate in %s: %w", kueueMetricsCertDir, err)
	}
	return nil
}

// writeFiles writes each named file in dir, readable by its owner only.
func writeFiles(dir string, files map[string][]byte) error {
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			return err
		}
	}
	return nil
}

// ensureNamespace creates namespace name unless it exists.
func (cp *ControlPlane) ensureNamespace(ctx context.Context, name string) error {
	client, err := kubernetes.NewForConfig(cp.adminConfig)
	if err != nil {
		return err
	}
	_, err = client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create namespace %s: %w", name, err)
	}
	return nil
}
