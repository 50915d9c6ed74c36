package framework

import (
	"context"
	"fmt"

	"k8s.io/client-go/kubernetes"
)

// EtcdURL returns etcd's client URL, for tests that act on etcd directly
// (for example compacting its history).
func (cp *ControlPlane) EtcdURL() string { return cp.etcdURL }

// RestartKubeAPIServer kills kube-apiserver (SIGKILL: its graceful shutdown
// takes seconds and etcd holds the state) and starts it again with the same
// flags on the same port, and waits for /readyz. Its watch caches start
// afresh, so a watch resuming from a resourceVersion older than the restart
// gets 410 Gone, as clients of a real control plane see after an upgrade.
func (cp *ControlPlane) RestartKubeAPIServer(ctx context.Context) error {
	if cp.apiServer == nil {
		return fmt.Errorf("kube-apiserver was never started")
	}
	spec := cp.apiServer.spec
	if err := cp.apiServer.kill(); err != nil {
		return fmt.Errorf("restart kube-apiserver: %w", err)
	}
	client, err := kubernetes.NewForConfig(cp.adminConfig)
	if err != nil {
		return err
	}
	ready := func(ctx context.Context) error {
		_, err := client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return err
	}
	proc, err := cp.startComponent(ctx, spec.name, spec.path, spec.args, apiServerStartTimeout, ready)
	if err != nil {
		return fmt.Errorf("restart kube-apiserver: %w", err)
	}
	cp.apiServer = proc
	return nil
}
