package options

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	genericapiserver "k8s.io/apiserver/pkg/server"
	flowcontrolapply "k8s.io/client-go/applyconfigurations/flowcontrol/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	flowcontrolclient "k8s.io/client-go/kubernetes/typed/flowcontrol/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
)

// The server's concurrency limits (--max-requests-inflight,
// --max-mutating-requests-inflight). With priority and fairness their sum
// is the seats the priority levels share. They are sized to the registry,
// not to kube-apiserver's 400+200: a list holds one of the registry's 20
// connections (pool_max_conns) while it reads, then encodes without it, so
// about twice the pool runs at once and the rest waits in APF's fair
// queues rather than in the pool's unfair one.
const (
	defaultMaxRequestsInFlight         = 30
	defaultMaxMutatingRequestsInFlight = 10 // UsageReports, the only creates
)

// flowControlUserAgent names the server's requests for FlowSchemas and
// PriorityLevelConfigurations in the hosting cluster's audit log.
const flowControlUserAgent = "platform-apiserver/priority-and-fairness"

// validateFeatures returns every problem with --profiling,
// --contention-profiling, --debug-socket-path and
// --enable-priority-and-fairness.
func (o *Options) validateFeatures() []error {
	f := o.Features
	var errs []error
	if f.EnableContentionProfiling && !f.EnableProfiling && f.DebugSocketPath == "" {
		errs = append(errs, errors.New("--contention-profiling needs --profiling or --debug-socket-path: block profiles are served there"))
	}
	if f.DebugSocketPath != "" {
		errs = append(errs, validateDebugSocketPath(f.DebugSocketPath)...)
	}
	if f.EnablePriorityAndFairness && o.ServerRun.MaxRequestsInFlight+o.ServerRun.MaxMutatingRequestsInFlight <= 0 {
		errs = append(errs, fmt.Errorf("--max-requests-inflight (%d) plus --max-mutating-requests-inflight (%d) must be positive with --enable-priority-and-fairness: their sum is the seats the priority levels share",
			o.ServerRun.MaxRequestsInFlight, o.ServerRun.MaxMutatingRequestsInFlight))
	}
	return errs
}

// validateDebugSocketPath checks that the socket can be made: the server
// removes whatever is at the path before it listens, so anything but an old
// socket there is refused.
func validateDebugSocketPath(path string) []error {
	var errs []error
	if dir := filepath.Dir(path); !isDir(dir) {
		errs = append(errs, fmt.Errorf("--debug-socket-path %q: directory %q does not exist", path, dir))
	}
	if fi, err := os.Lstat(path); err == nil && fi.Mode().Type() != fs.ModeSocket {
		errs = append(errs, fmt.Errorf("--debug-socket-path %q exists and is not a socket; the server would remove it: choose a new path", path))
	}
	return errs
}

func isDir(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.IsDir()
}

// applyFeatures applies profiling, the debug socket and API Priority and
// Fairness to config. Priority and fairness classifies requests with the
// hosting cluster's FlowSchemas and PriorityLevelConfigurations, read by
// informers of config's SharedInformerFactory, which the generic server
// starts in its post-start hook and checks in /readyz (informer-sync).
func (o *Options) applyFeatures(ctx context.Context, config *genericapiserver.RecommendedConfig) error {
	var client kubernetes.Interface
	if o.Features.EnablePriorityAndFairness {
		cfg, from, err := o.flowControlConfig()
		if err != nil {
			return err
		}
		kube, err := kubernetes.NewForConfig(rest.AddUserAgent(cfg, flowControlUserAgent))
		if err != nil {
			return fmt.Errorf("priority and fairness: client of the hosting cluster: %w", err)
		}
		client = readOnlyFlowControl{kube}
		config.SharedInformerFactory = informers.NewSharedInformerFactory(kube, 10*time.Minute)
		klog.FromContext(ctx).Info("API Priority and Fairness enabled with the hosting cluster's FlowSchemas",
			"kubeconfig", from, "host", cfg.Host, "seats", o.ServerRun.MaxRequestsInFlight+o.ServerRun.MaxMutatingRequestsInFlight)
	}
	if err := o.Features.ApplyTo(&config.Config, client, config.SharedInformerFactory); err != nil {
		return fmt.Errorf("priority and fairness: %w", err)
	}
	return nil
}

// flowControlConfig returns the hosting cluster's client config for
// priority and fairness, and where it came from: the first of --kubeconfig,
// --authorization-kubeconfig and --authentication-kubeconfig that is set,
// else the in-cluster config.
func (o *Options) flowControlConfig() (*rest.Config, string, error) {
	for _, f := range []struct{ flag, path string }{
		{"--kubeconfig", o.Discovery.kubeconfig()},
		{"--authorization-kubeconfig", o.Authorization.RemoteKubeConfigFile},
		{"--authentication-kubeconfig", o.Authentication.RemoteKubeConfigFile},
	} {
		if f.path == "" {
			continue
		}
		cfg, err := clientcmd.BuildConfigFromFlags("", f.path)
		if err != nil {
			return nil, "", fmt.Errorf("priority and fairness reads FlowSchemas with %s: %w", f.flag, err)
		}
		return cfg, f.flag + "=" + f.path, nil
	}
	cfg, err := rest.InClusterConfig()
	if errors.Is(err, rest.ErrNotInCluster) {
		return nil, "", errors.New("--enable-priority-and-fairness needs the hosting cluster's FlowSchemas: " +
			"run in a pod, or set --kubeconfig (or --authorization-kubeconfig), or --enable-priority-and-fairness=false")
	}
	if err != nil {
		return nil, "", fmt.Errorf("priority and fairness: in-cluster config: %w", err)
	}
	return cfg, "in-cluster", nil
}

// readOnlyFlowControl is the hosting cluster's client for priority and
// fairness, without FlowSchema status writes. APF's config controller
// writes a FlowSchema's Dangling condition when it differs from what it
// computes; kube-apiserver, which owns the objects, computes the same and
// keeps it, so this server only reads and needs no write permission.
type readOnlyFlowControl struct{ kubernetes.Interface }

func (c readOnlyFlowControl) FlowcontrolV1() flowcontrolclient.FlowcontrolV1Interface {
	return readOnlyFlowControlV1{c.Interface.FlowcontrolV1()}
}

type readOnlyFlowControlV1 struct {
	flowcontrolclient.FlowcontrolV1Interface
}

func (c readOnlyFlowControlV1) FlowSchemas() flowcontrolclient.FlowSchemaInterface {
	return readOnlyFlowSchemas{c.FlowcontrolV1Interface.FlowSchemas()}
}

type readOnlyFlowSchemas struct {
	flowcontrolclient.FlowSchemaInterface
}

// ApplyStatus leaves the status to kube-apiserver.
func (readOnlyFlowSchemas) ApplyStatus(context.Context, *flowcontrolapply.FlowSchemaApplyConfiguration, metav1.ApplyOptions) (*flowcontrolv1.FlowSchema, error) {
	return nil, nil
}
