package framework

import (
	"context"
	_ "embed"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

const kwokStartTimeout = time.Minute

// Simulated nodes carry kwok's conventional marks; kwok manages only nodes
// with the annotation.
const (
	kwokNodeAnnotation      = "kwok.x-k8s.io/node"
	kwokNodeAnnotationValue = "fake"
	kwokNodeLabel           = "type"
	kwokNodeLabelValue      = "kwok"
)

// kwokConfig holds the Stages, ClusterResourceUsage and Metric kwok runs
// with: see kwok-config.yaml.
//
//go:embed kwok-config.yaml
var kwokConfig []byte

// startKwok runs kwok against kube-apiserver as admin. Every node it manages
// gets InternalIP 127.0.0.1 and kubelet port kwokPort, where kwok serves
// /metrics/nodes/<node>/metrics/resource over TLS.
func (cp *ControlPlane) startKwok(ctx context.Context) error {
	port, err := freePort()
	if err != nil {
		return err
	}
	configPath := filepath.Join(cp.workDir, "kwok.yaml")
	if err := os.WriteFile(configPath, kwokConfig, 0o644); err != nil {
		return fmt.Errorf("write kwok config: %w", err)
	}
	s := cp.sim
	args := []string{
		"--kubeconfig=" + cp.adminKubeconfig,
		"--config=" + configPath,
		"--manage-nodes-with-annotation-selector=" + kwokNodeAnnotation + "=" + kwokNodeAnnotationValue,
		"--node-ip=127.0.0.1",
		"--node-port=" + strconv.Itoa(port),
		"--server-address=127.0.0.1:" + strconv.Itoa(port),
		"--tls-cert-file=" + s.kwokServing.certFile,
		"--tls-private-key-file=" + s.kwokServing.keyFile,
		// Pod IPs outside --service-cluster-ip-range, for readable output.
		"--cidr=10.244.0.0/16",
		// Renew each node's Lease in kube-node-lease like a kubelet (every
		// 10s). Without it the node lifecycle controller marks the nodes
		// Unknown after its grace period, and kwok's node-initialize stage
		// then rewrites their status without addresses, so metrics-server
		// stops scraping them about a minute after they were created.
		"--node-lease-duration-seconds=40",
	}
	tlsConfig, err := tlsTo(cp.pki.clusterCA.certPEM, nil)
	if err != nil {
		return err
	}
	proc, err := cp.startComponent(ctx, "kwok", filepath.Join(cp.binDir, "kwok"), args, kwokStartTimeout,
		httpCheck("https://127.0.0.1:"+strconv.Itoa(port)+"/healthz", tlsConfig))
	if err != nil {
		return fmt.Errorf("start kwok: %w", err)
	}
	s.kwok, s.kwokPort = proc, port
	return nil
}
