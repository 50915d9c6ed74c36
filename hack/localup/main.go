// Command localup runs the platform locally for `make run`: PostgreSQL, etcd,
// kube-apiserver, kube-controller-manager, kwok and metrics-server (simulated
// nodes with usage) and platform-apiserver registered through an APIService,
// seeded with sample data and a small simulated cluster, until SIGINT or
// SIGTERM.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"k8s.io/klog/v2"

	"github.com/example/platform-apiserver/test/framework"
)

func main() {
	klog.InitFlags(nil)
	platformBinary := flag.String("platform-apiserver-binary", "", "a prebuilt platform-apiserver to run instead of building ./cmd/apiserver")
	flag.Parse()
	code := 0
	if err := run(*platformBinary); err != nil {
		klog.Background().Error(err, "Local platform failed")
		code = 1
	}
	klog.FlushAndExit(klog.ExitFlushTimeout, code)
}

func run(platformBinary string) (err error) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	logger := klog.FromContext(ctx)

	root, err := framework.ModuleRoot()
	if err != nil {
		return err
	}
	workDir := filepath.Join(root, "_output", "local")
	// A fresh directory each run: old data and PKI would not match the new processes.
	if err := os.RemoveAll(workDir); err != nil {
		return fmt.Errorf("wipe %s (is another `make run` still using it?): %w", workDir, err)
	}
	// hack/build-tools.sh reuses control-plane binaries of the pinned versions
	// (cache, KUBEBUILDER_ASSETS, PATH) and builds only what is missing, one
	// line as each binary starts and ends, and first the estimate: the
	// seconds of this machine's last builds (all of them from source took
	// 19.6 minutes on a fresh 2-core machine); with everything cached the
	// stack is up in well under a minute.
	logger.Info("Starting local platform (control-plane binaries missing from the cache are reused from KUBEBUILDER_ASSETS or PATH when their versions match, else built from source; the estimate follows)", "workDir", workDir)
	begin := time.Now()
	cp, err := framework.Start(ctx, framework.Options{
		WorkDir:                 workDir,
		PlatformAPIServerBinary: platformBinary,
		PlatformAPIServerLog:    os.Stderr,
		BuildLog:                os.Stderr, // a line per binary reused or built, as it happens
		StartControllerManager:  true,
		StartSimulator:          true,
		// Discovery mirrors the local cluster, as it would a member in
		// production: the view below is computed from real objects.
		ExtraPlatformArgs: []string{
			"--cluster-id=local",
			"--kubeconfig=kubeconfig", // the admin kubeconfig in the work dir
			"--metrics-interval=10s",
		},
	})
	if err != nil {
		return fmt.Errorf("start the local control plane: %w", err)
	}
	defer func() {
		logger.Info("Stopping local platform")
		if stopErr := cp.Stop(); stopErr != nil && err == nil {
			err = fmt.Errorf("stop the local control plane: %w", stopErr)
		}
	}()

	if err := seedSimulatedCluster(ctx, cp); err != nil {
		return fmt.Errorf("seed the simulated cluster: %w", err)
	}
	printUsage(cp, filepath.Join(root, "_output", "bin"), time.Since(begin))
	<-ctx.Done()
	logger.Info("Received a stop signal")
	return nil
}

// printUsage tells the person at the terminal how to reach the platform API;
// pluginDir holds kubectl-platform (make build).
func printUsage(cp *framework.ControlPlane, pluginDir string, took time.Duration) {
	fmt.Printf(`
Platform API is up after %s (logs in %s).

  export KUBECONFIG=%s
  export PATH=%s:%s:$PATH   # kubectl v1.37.2 and the kubectl platform plugin

The local cluster has simulated nodes (kwok) and pods in team-a and team-b:
  kubectl get nodes
  kubectl get pods -A -o wide
  kubectl describe quota -n team-a
  kubectl top nodes        # once metrics-server has scraped (about %s)

Try (discovery mirrors the cluster as "local"; usage appears once metrics are scraped):
  kubectl get nodecapacities
  kubectl get nodecapacities -w
  kubectl get clusternamespaces -A
  kubectl get clustercapacities -o wide
  kubectl get platform -A
  kubectl create -o yaml -f - <<EOF   # the last hour's usage of the local cluster
apiVersion: platform.example.io/v1alpha1
kind: UsageReport
spec: {cluster: local, window: 1h}
EOF
  kubectl create -o yaml -f - <<EOF   # where 10 replicas of 100m/128Mi fit
apiVersion: platform.example.io/v1alpha1
kind: PlacementReport
spec: {replicas: 10, requests: {cpu: 100m, memory: 128Mi}}
EOF
  kubectl platform usage local --window 3h --step 1h   # usage over time next to requests
  kubectl explain nodecapacity.status
  kubectl api-resources --api-group=%s

Database: %s
Press Ctrl-C to stop.
`, took.Round(time.Second), cp.WorkDir(), cp.AdminKubeconfig(), cp.BinDir(), pluginDir, 2*framework.MetricResolution, framework.PlatformGroup, cp.DatabaseURL())
}
