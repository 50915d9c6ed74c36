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
	args := append(cp.componentServingArgs(port, cp.pki.componentServing), "--leader-elect=false")
	tlsConfig, err := tlsTo(cp.pki.clusterCA.certPEM, nil)
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
