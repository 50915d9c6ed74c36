package framework

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

const schedulerStartTimeout = 2 * time.Minute

// startScheduler runs kube-scheduler against kube-apiserver with the admin
// identity and its default profile (every default plugin, as a real
// cluster's), and waits for its /healthz.
func (cp *ControlPlane) startScheduler(ctx context.Context) error {
	bin := filepath.Join(cp.binDir, "kube-scheduler")
	if _, err := os.Stat(bin); err != nil {
		return fmt.Errorf("kube-scheduler missing from %s (run hack/build-tools.sh, or turn Options.StartScheduler off): %w", cp.binDir, err)
	}
	port, err := freePort()
	if err != nil {
		return err
	}
	p := cp.pki
	args := []string{
		"--kubeconfig=" + cp.adminKubeconfig,
		"--authentication-kubeconfig=" + cp.adminKubeconfig,
		"--authorization-kubeconfig=" + cp.adminKubeconfig,
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(port),
		"--tls-cert-file=" + p.componentServing.certFile,
		"--tls-private-key-file=" + p.componentServing.keyFile,
		"--leader-elect=false",
	}
	tlsConfig, err := tlsTo(p.clusterCA.certPEM, nil)
	if err != nil {
		return err
	}
	proc, err := cp.startComponent(ctx, "kube-scheduler", bin, args,
		schedulerStartTimeout, httpCheck("https://127.0.0.1:"+strconv.Itoa(port)+"/healthz", tlsConfig))
	if err != nil {
		return fmt.Errorf("start kube-scheduler: %w", err)
	}
	cp.scheduler = proc
	return nil
}
