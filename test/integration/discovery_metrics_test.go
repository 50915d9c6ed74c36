package integration

import (
	"context"
	"os"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/example/platform-apiserver/test/framework"
)

// TestDiscoveryMetrics scrapes the real metrics.k8s.io (metrics-server over
// kwok's simulated kubelets): a node's usage is unknown until a sample is
// stored, then appears in its NodeCapacity, and follows its pods' load.
func TestDiscoveryMetrics(t *testing.T) {
	e := newEnv(t, framework.Options{
		PlatformAPIServerBinary: os.Getenv("PLATFORM_APISERVER_BINARY"),
		StartSimulator:          true,
		StartControllerManager:  true, // lifts the nodes' not-ready taint
		ExtraPlatformArgs: []string{
			"--cluster-id=local",
			"--member-kubeconfig=kubeconfig",
			"--discovery-batch-delay=50ms",
			"--metrics-interval=2s",
		},
	})
	ctx := t.Context()
	if _, err := e.cp.CreateSimulatedNode(ctx, framework.SimulatedNode{Name: "busy"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.cp.CreateSimulatedNode(ctx, framework.SimulatedNode{Name: "idle"}); err != nil {
		t.Fatal(err)
	}
	e.kubectl(t, "create", "namespace", "load")
	if _, err := e.kube.CoreV1().Pods("load").Create(ctx, testPod("load", "worker", "busy", "1", "2Gi"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	eventually(t, "the nodes mirrored", mirrorTimeout, func(ctx context.Context) (bool, string) {
		_, err := e.platform.PlatformV1alpha1().NodeCapacities().Get(ctx, "local.idle", metav1.GetOptions{})
		return err == nil, err2s(err)
	})

	usage := func(ctx context.Context, name string) (cpu, mem resource.Quantity, ok bool) {
		nc, err := e.platform.PlatformV1alpha1().NodeCapacities().Get(ctx, name, metav1.GetOptions{})
		if err != nil || nc.Status.Usage == nil {
			return cpu, mem, false
		}
		return nc.Status.Usage.CPU, nc.Status.Usage.Memory, true
	}
	eventually(t, "usage of both nodes from metrics-server", 3*time.Minute, func(ctx context.Context) (bool, string) {
		busyCPU, busyMem, ok1 := usage(ctx, "local.busy")
		idleCPU, _, ok2 := usage(ctx, "local.idle")
		if !ok1 || !ok2 {
			return false, "usage unknown so far"
		}
		return busyCPU.Cmp(idleCPU) > 0 && busyMem.Value() > 0, busyCPU.String() + " vs " + idleCPU.String()
	})
	if v, err := e.platformMetric(ctx, "platform_discovery_metrics_samples_stored_total", `cluster="local"`); err != nil || v < 2 {
		t.Errorf("samples stored metric = %v, %v; want at least 2", v, err)
	}
	out := e.kubectl(t, "get", "nc", "local.busy")
	if row := row(t, out, "local.busy"); row[4] == "<unknown>" {
		t.Errorf("kubectl shows no usage for local.busy:\n%s", out)
	}
}
