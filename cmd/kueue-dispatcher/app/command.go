// Package app is platform-kueue-dispatcher's command: flags, clients and
// the serving of metrics and health.
package app

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/record"
	"k8s.io/component-base/cli/globalflag"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/klog/v2"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	kueueclient "sigs.k8s.io/kueue/client-go/clientset/versioned"
	kueueinformers "sigs.k8s.io/kueue/client-go/informers/externalversions"

	"github.com/example/platform-apiserver/pkg/dispatcher"
	platformclient "github.com/example/platform-apiserver/pkg/generated/clientset/versioned"
	platforminformers "github.com/example/platform-apiserver/pkg/generated/informers/externalversions"
)

// NewCommand returns the platform-kueue-dispatcher command.
func NewCommand(ctx context.Context) *cobra.Command {
	o := NewOptions()
	cmd := &cobra.Command{
		Use:   "platform-kueue-dispatcher",
		Short: "Nominate the MultiKueue worker where each Kueue Workload fits, by platform.example.io's PlacementReport",
		Long: `platform-kueue-dispatcher is an external dispatcher for Kueue's MultiKueue (Kueue's
configuration names it in multiKueue.dispatcherName). For each Workload with quota reserved
in the manager cluster and its MultiKueue admission check pending, it asks a PlacementReport
per pod set over the members that mirror the check's worker clusters and writes the best one
that fits every pod set to status.nominatedClusterNames. See docs/dispatcher.md.`,
		SilenceUsage: true,
		Args:         cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if errs := o.Validate(); len(errs) > 0 {
				return utilerrors.NewAggregate(errs)
			}
			return run(cmd.Context(), o)
		},
	}
	cmd.CompletionOptions.DisableDefaultCmd = true
	cmd.SetContext(ctx)
	fss := o.Flags()
	globalflag.AddGlobalFlags(fss.FlagSet("global"), cmd.Name())
	for _, fs := range fss.FlagSets {
		cmd.Flags().AddFlagSet(fs)
	}
	return cmd
}

func restConfig(kubeconfig string, o *Options) (*rest.Config, error) {
	var cfg *rest.Config
	var err error
	if kubeconfig == "" {
		cfg, err = rest.InClusterConfig()
	} else {
		cfg, err = clientcmd.BuildConfigFromFlags("", kubeconfig)
	}
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %q: %w (give --kubeconfig outside a cluster)", kubeconfig, err)
	}
	cfg.QPS, cfg.Burst = o.QPS, o.Burst
	cfg.UserAgent = "platform-kueue-dispatcher"
	return cfg, nil
}

func run(ctx context.Context, o *Options) error {
	logger := klog.FromContext(ctx)
	managerCfg, err := restConfig(o.Kubeconfig, o)
	if err != nil {
		return err
	}
	platformCfg := managerCfg
	if o.PlatformKubeconfig != "" {
		if platformCfg, err = restConfig(o.PlatformKubeconfig, o); err != nil {
			return err
		}
	}
	kube, err := kubernetes.NewForConfig(managerCfg)
	if err != nil {
		return err
	}
	platformKube, err := kubernetes.NewForConfig(platformCfg)
	if err != nil {
		return err
	}
	kc, err := kueueclient.NewForConfig(managerCfg)
	if err != nil {
		return err
	}
	pc, err := platformclient.NewForConfig(platformCfg)
	if err != nil {
		return err
	}
	checkCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := errors.Join(
		dispatcher.CheckAccess(checkCtx, kube.AuthorizationV1().SelfSubjectAccessReviews(), "Kueue's manager cluster", dispatcher.ManagerPermissions),
		dispatcher.CheckAccess(checkCtx, platformKube.AuthorizationV1().SelfSubjectAccessReviews(), "the platform API's cluster", dispatcher.PlatformPermissions),
	); err != nil {
		return err
	}

	scheme := runtime.NewScheme()
	if err := kueue.AddToScheme(scheme); err != nil {
		return err
	}
	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: kube.CoreV1().Events("")})
	defer broadcaster.Shutdown()
	recorder := broadcaster.NewRecorder(scheme, corev1.EventSource{Component: "platform-kueue-dispatcher"})

	dispatcher.RegisterMetrics()
	informers := kueueinformers.NewSharedInformerFactory(kc, 0)
	platformInformers := platforminformers.NewSharedInformerFactory(pc, 0)
	c, err := dispatcher.NewController(o.Config(), kc, pc, dispatcher.ClaimTemplates{Kube: kube}, informers,
		platformInformers.Platform().V1alpha1().ClusterCapacities(), recorder)
	if err != nil {
		return err
	}
	informers.Start(ctx.Done())
	platformInformers.Start(ctx.Done())
	defer informers.Shutdown()
	defer platformInformers.Shutdown()

	g, ctx := errgroup.WithContext(ctx)
	if o.BindAddress != "" {
		g.Go(func() error { return serve(ctx, o.BindAddress, c.HasSynced) })
	}
	g.Go(func() error { return c.Run(ctx) })
	logger.Info("Dispatching", "bindAddress", o.BindAddress)
	return g.Wait()
}

// serve answers /metrics, /healthz and /readyz (ready once the informers
// have synced) until ctx ends.
func serve(ctx context.Context, addr string, synced func() bool) error {
	mux := http.NewServeMux()
	mux.Handle("/metrics", legacyregistry.Handler())
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !synced() {
			http.Error(w, "Kueue informers not synced", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok"))
	})
	srv := &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve %s: %w", addr, err)
	}
	return nil
}
