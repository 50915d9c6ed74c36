package framework

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

const controllerManagerStartTimeout = 2 * time.Minute

// controllerManagerControllers are the controllers tests need: namespace
// deletion, garbage collection, service accounts and ClusterRole aggregation
// (the shipped platform-viewer into view). The rest would only burn CPU on a
// loopback cluster without nodes.
var controllerManagerControllers = []string{
	"clusterrole-aggregation-controller",
	"namespace-controller",
	"garbage-collector-controller",
	"serviceaccount-controller",
	"serviceaccount-token-controller",
}

// startControllerManager runs kube-controller-manager against kube-apiserver
// with the admin identity and waits for its /healthz.
func (cp *ControlPlane) startControllerManager(ctx context.Context) error {
	port, err := freePort()
	if err != nil {
		return err
	}
	controllers := controllerManagerControllers
	if cp.opts.StartSimulator {
		// Simulated workloads come with ResourceQuotas, whose status someone
		// must compute, and nodes whose not-ready taint (added at creation)
		// the node lifecycle controller lifts once kwok reports them Ready.
		controllers = append(slices.Clone(controllers), "resourcequota-controller", "node-lifecycle-controller")
	} else if cp.opts.StartQuotaController {
		controllers = append(slices.Clone(controllers), "resourcequota-controller")
	}
	if cp.opts.StartJobController {
		controllers = append(slices.Clone(controllers), "job-controller")
	}
	p := cp.pki
	args := append(cp.componentServingArgs(port, p.componentServing),
		"--leader-elect=false",
		"--controllers="+strings.Join(controllers, ","),
		"--service-account-private-key-file="+p.serviceAccountKeyFile,
		"--root-ca-file="+p.clusterCA.certFile,
		"--use-service-account-credentials=false",
	)
	tlsConfig, err := tlsTo(p.clusterCA.certPEM, nil)
	if err != nil {
		return err
	}
	proc, err := cp.startComponent(ctx, "kube-controller-manager", filepath.Join(cp.binDir, "kube-controller-manager"), args,
		controllerManagerStartTimeout, httpCheck("https://127.0.0.1:"+strconv.Itoa(port)+"/healthz", tlsConfig))
	if err != nil {
		return fmt.Errorf("start kube-controller-manager: %w", err)
	}
	cp.controllerManager = proc
	return nil
}
