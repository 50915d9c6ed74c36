package framework

import "io"

// Options configures Start. The zero value is usable: it starts everything in a
// fresh temporary directory with binaries built by hack/build-tools.sh.
type Options struct {
	// WorkDir holds PKI, kubeconfigs, data directories and process logs.
	// Empty means a new temporary directory that Stop removes.
	// A given directory is created if missing and never removed.
	WorkDir string

	// BinDir holds etcd, kube-apiserver, kube-controller-manager and kubectl
	// (and kwok and metrics-server for StartSimulator).
	// Empty means the directory printed by hack/build-tools.sh, which builds
	// them into a cache on first use.
	BinDir string

	// DatabaseURL is the PostgreSQL DSN for the platform-apiserver. Empty means
	// the framework's postgres package starts one (it honours
	// TEST_DATABASE_URL itself).
	DatabaseURL string

	// PlatformAPIServerBinary is the platform-apiserver to run. Empty means it is
	// built from ./cmd/apiserver of this module into WorkDir.
	PlatformAPIServerBinary string

	// ExtraPlatformArgs are appended to the platform-apiserver's flags.
	ExtraPlatformArgs []string

	// ExtraKubeAPIServerArgs are appended to kube-apiserver's flags (e.g.
	// --runtime-config=resource.k8s.io/v1=false for a member without DRA).
	ExtraKubeAPIServerArgs []string

	// Log, when set, receives every process's output, each line prefixed with
	// the process name. The output always goes to <WorkDir>/<name>.log too.
	Log io.Writer

	// PlatformAPIServerLog, when set, also receives the platform-apiserver's
	// raw output (make run points it at the terminal).
	PlatformAPIServerLog io.Writer

	// BuildLog, when set, receives hack/build-tools.sh's progress as it
	// happens: a line per control-plane binary reused or built, with the
	// time a build took (make run points it at the terminal).
	BuildLog io.Writer

	// StartControllerManager starts kube-controller-manager, which namespace
	// deletion (and garbage collection) needs.
	StartControllerManager bool

	// StartQuotaController adds the resourcequota controller to
	// kube-controller-manager (with StartControllerManager), which fills
	// ResourceQuotas' status as a real cluster's does (StartSimulator adds
	// it too).
	StartQuotaController bool

	// StartScheduler starts kube-scheduler with its default profile, so
	// pods without spec.nodeName are placed as in a real cluster (on kwok's
	// nodes with StartSimulator).
	StartScheduler bool

	// StartJobController adds the Job controller to kube-controller-manager
	// (with StartControllerManager), so a Job's pods are created as in a
	// real cluster (and run on kwok's nodes with StartSimulator and
	// StartScheduler): a MultiKueue worker's.
	StartJobController bool

	// WithoutPlatform starts a bare Kubernetes cluster: etcd, kube-apiserver
	// and the components asked for, without PostgreSQL or the
	// platform-apiserver (a member cluster, a MultiKueue worker).
	// DatabaseURL, PlatformAPIServerBinary and ExtraPlatformArgs are unused.
	WithoutPlatform bool

	// StartSimulator starts kwok (simulated nodes whose pods run, with
	// kubelet-style resource metrics) and metrics-server registered as
	// metrics.k8s.io/v1beta1, so CreateSimulatedNode and `kubectl top` work.
	// It needs kwok and metrics-server in BinDir (hack/build-tools.sh builds them).
	StartSimulator bool
}
