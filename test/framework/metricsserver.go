package framework

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// The resource metrics API that StartSimulator registers.
const (
	MetricsGroup        = "metrics.k8s.io"
	MetricsVersion      = "v1beta1"
	MetricsGroupVersion = MetricsGroup + "/" + MetricsVersion
	// MetricsAPIServiceName is the APIService that serves MetricsGroupVersion.
	MetricsAPIServiceName = MetricsVersion + "." + MetricsGroup
)

// MetricResolution is how often metrics-server scrapes every node (the
// minimum it accepts). A new node has usage after about two scrapes.
const MetricResolution = 10 * time.Second

const (
	metricsNamespace          = "kube-system"
	metricsServiceName        = "metrics-server"
	metricsServerStartTimeout = time.Minute
	metricsServedTimeout      = time.Minute
)

// metricsAPI describes metrics-server's registration, with the priorities of
// its upstream manifests.
func (cp *ControlPlane) metricsAPI() aggregatedAPI {
	return aggregatedAPI{
		group: MetricsGroup, version: MetricsVersion,
		namespace: metricsNamespace, service: metricsServiceName,
		port: cp.sim.metricsPort, caPEM: cp.pki.clusterCA.certPEM,
		groupPriorityMinimum: 100, versionPriority: 100,
	}
}

// startMetricsServer runs metrics-server as admin, scraping kwok's nodes, and
// registers it as the metrics.k8s.io APIService.
func (cp *ControlPlane) startMetricsServer(ctx context.Context) error {
	port, err := freePort()
	if err != nil {
		return err
	}
	s := cp.sim
	args := append(cp.componentServingArgs(port, s.metricsServing),
		"--metric-resolution="+MetricResolution.String(),
		// Must stay below 90% of the resolution.
		"--kubelet-request-timeout=5s",
		// Every simulated node is 127.0.0.1 with kwok's port in its status.
		"--kubelet-use-node-status-port",
		"--kubelet-preferred-address-types=InternalIP",
		// kwok's certificate is signed by the cluster CA for 127.0.0.1, so
		// verify it rather than pass --kubelet-insecure-tls.
		"--kubelet-certificate-authority="+cp.pki.clusterCA.certFile,
		"--profiling=false",
	)
	tlsConfig, err := tlsTo(cp.pki.clusterCA.certPEM, cp.pki.admin)
	if err != nil {
		return err
	}
	// /readyz fails until the first node is scraped, so wait for /livez.
	proc, err := cp.startComponent(ctx, "metrics-server", filepath.Join(cp.binDir, "metrics-server"), args, metricsServerStartTimeout,
		httpCheck("https://127.0.0.1:"+strconv.Itoa(port)+"/livez", tlsConfig))
	if err != nil {
		return fmt.Errorf("start metrics-server: %w", err)
	}
	s.metricsServer, s.metricsPort = proc, port
	api := cp.metricsAPI()
	if err := cp.registerAPI(ctx, api); err != nil {
		return fmt.Errorf("register metrics-server: %w", err)
	}
	return cp.waitAPIServed(ctx, api, proc, metricsServedTimeout)
}

// FreezeMetricsServer stops metrics-server as a hung host is stopped
// (SIGSTOP): its sockets stay open and nothing answers on them, so a
// metrics.k8s.io request hangs until its timeout. ThawMetricsServer resumes
// it.
func (cp *ControlPlane) FreezeMetricsServer() error {
	return syscall.Kill(cp.sim.metricsServer.pid(), syscall.SIGSTOP)
}

// ThawMetricsServer resumes a frozen metrics-server (SIGCONT).
func (cp *ControlPlane) ThawMetricsServer() error {
	return syscall.Kill(cp.sim.metricsServer.pid(), syscall.SIGCONT)
}
