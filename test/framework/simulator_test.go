package framework_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/example/platform-apiserver/test/framework"
)

// nodeMetricsList is the part of metrics.k8s.io/v1beta1 NodeMetricsList the
// test reads.
type nodeMetricsList struct {
	Items []struct {
		Metadata metav1.ObjectMeta   `json:"metadata"`
		Usage    corev1.ResourceList `json:"usage"`
	} `json:"items"`
}

func TestSimulator(t *testing.T) {
	cp := framework.ForTest(t, framework.Options{
		PlatformAPIServerBinary: os.Getenv(envPlatformBinary),
		StartSimulator:          true,
	})
	ctx := t.Context()
	client, err := kubernetes.NewForConfig(cp.AdminConfig())
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for _, name := range []string{"sim-busy", "sim-idle"} {
		node, err := cp.CreateSimulatedNode(ctx, framework.SimulatedNode{Name: name})
		if err != nil {
			t.Fatal(err)
		}
		if got := node.Status.Capacity.Cpu().String(); got != "4" {
			t.Errorf("node %s cpu capacity = %s, want 4 (kwok must keep the given capacity)", name, got)
		}
		if addr := node.Status.Addresses; len(addr) == 0 || addr[0].Address != "127.0.0.1" {
			t.Errorf("node %s addresses = %v, want InternalIP 127.0.0.1 first", name, addr)
		}
	}
	t.Logf("2 simulated nodes Ready after %s", time.Since(start).Round(time.Millisecond))

	pod := runPodOn(ctx, t, client, "sim-busy")
	t.Logf("pod %s/%s Running after %s", pod.Namespace, pod.Name, time.Since(start).Round(time.Millisecond))

	usage := waitNodeMetrics(ctx, t, cp, "sim-busy", "sim-idle")
	busy, idle := usage["sim-busy"], usage["sim-idle"]
	t.Logf("metrics.k8s.io lists both nodes after %s: sim-busy cpu %s memory %s, sim-idle cpu %s memory %s",
		time.Since(start).Round(time.Millisecond), busy.Cpu(), busy.Memory(), idle.Cpu(), idle.Memory())
	if busy.Cpu().Cmp(*idle.Cpu()) <= 0 || busy.Memory().Cmp(*idle.Memory()) <= 0 {
		t.Errorf("usage of sim-busy (cpu %s, memory %s) should exceed idle sim-idle's (cpu %s, memory %s): its pod requests 500m/512Mi",
			busy.Cpu(), busy.Memory(), idle.Cpu(), idle.Memory())
	}

	out, _, err := cp.Kubectl(ctx, "top", "nodes")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"sim-busy", "sim-idle"} {
		if !strings.Contains(out, name) {
			t.Errorf("kubectl top nodes lacks %s:\n%s", name, out)
		}
	}
}

// runPodOn creates a pod with requests bound to node and waits until kwok
// reports it Running.
func runPodOn(ctx context.Context, t *testing.T, client kubernetes.Interface, node string) *corev1.Pod {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "simulated"}}
	if _, err := client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns.Name},
		Spec: corev1.PodSpec{
			NodeName: node, // no scheduler runs
			Containers: []corev1.Container{{
				Name: "web", Image: "registry.k8s.io/pause:3.10",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceCPU:    resource.MustParse("500m"),
					corev1.ResourceMemory: resource.MustParse("512Mi"),
				}},
			}},
		},
	}
	if _, err := client.CoreV1().Pods(ns.Name).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	got := pod
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		p, err := client.CoreV1().Pods(ns.Name).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		got = p
		return p.Status.Phase == corev1.PodRunning, nil
	})
	if err != nil {
		t.Fatalf("pod %s/%s not Running on %s: %v (phase %q)", ns.Name, pod.Name, node, err, got.Status.Phase)
	}
	return got
}

// waitNodeMetrics polls metrics.k8s.io through kube-apiserver until every
// node has non-zero CPU and memory usage, and returns the usage by node.
func waitNodeMetrics(ctx context.Context, t *testing.T, cp *framework.ControlPlane, nodes ...string) map[string]corev1.ResourceList {
	t.Helper()
	client, err := kubernetes.NewForConfig(cp.AdminConfig())
	if err != nil {
		t.Fatal(err)
	}
	var usage map[string]corev1.ResourceList
	var last string
	err = wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		raw, err := client.RESTClient().Get().AbsPath("/apis/" + framework.MetricsGroupVersion + "/nodes").DoRaw(ctx)
		if err != nil {
			last = err.Error()
			return false, nil
		}
		var list nodeMetricsList
		if err := json.Unmarshal(raw, &list); err != nil {
			return false, fmt.Errorf("decode node metrics: %w", err)
		}
		usage = map[string]corev1.ResourceList{}
		for _, item := range list.Items {
			if !item.Usage.Cpu().IsZero() && !item.Usage.Memory().IsZero() {
				usage[item.Metadata.Name] = item.Usage
			}
		}
		for _, n := range nodes {
			if _, ok := usage[n]; !ok {
				last = fmt.Sprintf("no non-zero usage for node %s yet in %s", n, raw)
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("node metrics through kube-apiserver: %v (last: %s)", err, last)
	}
	return usage
}
