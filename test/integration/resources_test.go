package integration

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/example/platform-apiserver/test/framework"
)

const gpu = "nvidia.com/gpu"

// freeGPUs selects the NodeCapacities with a GPU not requested.
const freeGPUs = "status.available.other.nvidia.com/gpu!=0"

// TestOtherResources is the acceptance test of other resources on the real
// stack: kwok nodes with GPUs, ephemeral-storage and hugepages, pods
// requesting them (one with an init container, one with a sidecar), and
// discovery mirroring them. Every NodeCapacity's requests are what kubectl
// describe node allocates, for every resource it lists; the free-GPU field
// selector lists exactly the nodes with a free GPU, in kubectl and in a
// watch, which sees a node leave when a pod takes its last GPU; -o wide
// shows GPUs free over allocatable.
func TestOtherResources(t *testing.T) {
	t.Parallel()
	e := newSimulatorEnv(t)
	ctx := t.Context()
	for _, n := range []framework.SimulatedNode{
		otherNode("gpu-a", "4", "100Gi", "1Gi"),
		otherNode("gpu-b", "2", "100Gi", "512Mi"),
		otherNode("gpu-c", "1", "50Gi", ""),
		otherNode("cpu", "", "50Gi", "512Mi"),
	} {
		if _, err := e.cp.CreateSimulatedNode(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	e.kubectl(t, "create", "namespace", "res")

	// gpu-a: 3 of 4 GPUs. staged's init container asks more CPU and memory
	// than its container: the pod requests the larger.
	train := testPod("res", "train", "gpu-a", "500m", "1Gi", "500m", "1Gi")
	for i := range train.Spec.Containers {
		request(&train.Spec.Containers[i], gpu, "1", "ephemeral-storage", "2Gi", "hugepages-2Mi", "128Mi")
	}
	staged := testPod("res", "staged", "gpu-a", "250m", "256Mi")
	request(&staged.Spec.Containers[0], gpu, "1")
	staged.Spec.InitContainers = []corev1.Container{container("setup", "cpu", "1", "memory", "512Mi", gpu, "1")}
	// gpu-b: both GPUs. A sidecar (an init container that keeps running)
	// adds to the containers and to the init containers after it.
	always := corev1.ContainerRestartPolicyAlways
	sidecar := testPod("res", "sidecar", "gpu-b", "500m", "1Gi")
	request(&sidecar.Spec.Containers[0], gpu, "2", "hugepages-2Mi", "256Mi")
	proxy := container("proxy", "cpu", "100m", "memory", "64Mi", "ephemeral-storage", "1Gi")
	proxy.RestartPolicy = &always
	sidecar.Spec.InitContainers = []corev1.Container{proxy, container("migrate", "cpu", "2", "memory", "128Mi")}
	// cpu: no GPU; gpu-c: its GPU free.
	web := testPod("res", "web", "cpu", "1", "2Gi")
	request(&web.Spec.Containers[0], "ephemeral-storage", "500Mi", "hugepages-2Mi", "64Mi")
	for _, p := range []*corev1.Pod{train, staged, sidecar, web} {
		create(t, e.kube.CoreV1().Pods("res").Create, p)
	}

	nodes := []string{"gpu-a", "gpu-b", "gpu-c", "cpu"}
	all := []string{"cpu", "memory", "ephemeral-storage", "hugepages-2Mi"}
	e.requestsAsDescribed(t, nodes, map[string][]string{"gpu-a": append(all, gpu), "gpu-b": append(all, gpu), "cpu": all})
	e.freeGPUNodes(t, nodes, "local.gpu-a", "local.gpu-c")

	out := e.kubectl(t, "get", "nc", "-o", "wide")
	if !strings.Contains(out, "EXTENDED FREE/ALLOC") {
		t.Errorf("kubectl get nc -o wide has no Extended Free/Alloc column:\n%s", out)
	}
	for name, want := range map[string]string{"local.gpu-a": "nvidia.com/gpu=1/4", "local.gpu-b": "nvidia.com/gpu=0/2",
		"local.gpu-c": "nvidia.com/gpu=1/1", "local.cpu": "<none>"} {
		if got := cell(t, out, name, "EXTENDED FREE/ALLOC"); got != want {
			t.Errorf("kubectl get nc -o wide: %s shows %q, want %q\n%s", name, got, want, out)
		}
	}
	// Quantities select as the whole numbers they are.
	for _, sel := range []string{"status.allocatable.other.hugepages-2Mi=1Gi", "status.allocatable.other.hugepages-2Mi=1073741824"} {
		if got := strings.Fields(e.kubectl(t, "get", "nc", "--field-selector", sel, "-o", "name")); !slices.Equal(got, []string{"nodecapacity.platform.example.io/local.gpu-a"}) {
			t.Errorf("--field-selector %s: %v, want local.gpu-a", sel, got)
		}
	}

	// A pod takes gpu-a's last GPU: gpu-a leaves the list and the watch.
	w := e.watchNodeCapacitiesWhere(t, freeGPUs)
	last := testPod("res", "last", "gpu-a", "100m", "128Mi")
	request(&last.Spec.Containers[0], gpu, "1")
	create(t, e.kube.CoreV1().Pods("res").Create, last)
	e.freeGPUNodes(t, nodes, "local.gpu-c")
	eventually(t, "the watch of nodes with a free GPU sees local.gpu-a leave", mirrorTimeout, func(context.Context) (bool, string) {
		w.mu.Lock()
		defer w.mu.Unlock()
		return slices.ContainsFunc(w.evs, func(ev nodeEvent) bool { return ev.Type == watch.Deleted && ev.Name == "local.gpu-a" }), w.evs.String()
	})
	for _, ev := range w.stop() {
		if ev.Name != "local.gpu-a" && ev.Name != "local.gpu-c" || ev.Type == watch.Deleted && ev.Name != "local.gpu-a" {
			t.Errorf("watch %s: %s, want events of local.gpu-a and local.gpu-c only, and only gpu-a leaving", freeGPUs, ev)
		}
	}
	e.requestsAsDescribed(t, nodes, nil)
	if out := e.kubectl(t, "get", "nc", "local.gpu-a", "-o", "wide"); cell(t, out, "local.gpu-a", "EXTENDED FREE/ALLOC") != "nvidia.com/gpu=0/4" {
		t.Errorf("local.gpu-a -o wide: %q, want nvidia.com/gpu=0/4 in EXTENDED FREE/ALLOC", out)
	}
}

// otherNode is a kwok node with gpus nvidia.com/gpu, ephemeral-storage and
// hugepages-2Mi ("" for none) in capacity and allocatable (5Gi of the
// storage reserved).
func otherNode(name, gpus, storage, hugepages string) framework.SimulatedNode {
	capacity := framework.DefaultSimulatedNodeCapacity()
	capacity[corev1.ResourceEphemeralStorage] = resource.MustParse(storage)
	if gpus != "" {
		capacity[gpu] = resource.MustParse(gpus)
	}
	if hugepages != "" {
		capacity["hugepages-2Mi"] = resource.MustParse(hugepages)
	}
	allocatable := capacity.DeepCopy()
	free := capacity[corev1.ResourceEphemeralStorage]
	free.Sub(resource.MustParse("5Gi"))
	allocatable[corev1.ResourceEphemeralStorage] = free
	return framework.SimulatedNode{Name: name, Capacity: capacity, Allocatable: allocatable}
}

// container is a container requesting name/quantity pairs.
func container(name string, requests ...string) corev1.Container {
	c := corev1.Container{Name: name, Image: "registry.example/app:1"}
	request(&c, requests...)
	return c
}

// request adds name/quantity pairs to a container's requests; hugepages and
// extended resources get equal limits, as Kubernetes requires.
func request(c *corev1.Container, requests ...string) {
	if c.Resources.Requests == nil {
		c.Resources.Requests = corev1.ResourceList{}
	}
	for i := 0; i+1 < len(requests); i += 2 {
		name, q := corev1.ResourceName(requests[i]), resource.MustParse(requests[i+1])
		c.Resources.Requests[name] = q
		if strings.Contains(string(name), "/") || strings.HasPrefix(string(name), "hugepages-") {
			if c.Resources.Limits == nil {
				c.Resources.Limits = corev1.ResourceList{}
			}
			c.Resources.Limits[name] = q
		}
	}
}

// requestsAsDescribed waits until each node's NodeCapacity requests, read
// with the generated clientset through the aggregator, what kubectl
// describe node shows allocated, for every resource it lists; must names
// per node the resources describe has to show a non-zero amount of, so the
// comparison covers them.
func (e *env) requestsAsDescribed(t *testing.T, nodes []string, must map[string][]string) {
	t.Helper()
	for _, node := range nodes {
		eventually(t, "local."+node+" requests what kubectl describe node allocates", mirrorTimeout, func(ctx context.Context) (bool, string) {
			out, _, err := e.cp.Kubectl(ctx, "describe", "node", node)
			if err != nil {
				return false, err.Error()
			}
			described, err := allocatedResources(out)
			if err != nil {
				return false, err.Error()
			}
			for _, name := range must[node] {
				if q := described[name]; q.IsZero() {
					return false, fmt.Sprintf("kubectl describe node %s allocates no %s:\n%s", node, name, out)
				}
			}
			nc, err := e.platform.PlatformV1alpha1().NodeCapacities().Get(ctx, "local."+node, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			var diff []string
			for _, name := range slices.Sorted(maps.Keys(described)) {
				var got resource.Quantity
				switch name {
				case "cpu":
					got = nc.Status.Requested.CPU
				case "memory":
					got = nc.Status.Requested.Memory
				default:
					got = nc.Status.Requested.Other[name]
				}
				if want := described[name]; got.Cmp(want) != 0 {
					diff = append(diff, fmt.Sprintf("%s: NodeCapacity %s, describe %s", name, got.String(), want.String()))
				}
			}
			return len(diff) == 0, strings.Join(diff, "; ")
		})
	}
}

// allocatedResources parses the Requests column of kubectl describe node's
// "Allocated resources" table: resource name → quantity.
func allocatedResources(describe string) (map[string]resource.Quantity, error) {
	_, table, ok := strings.Cut(describe, "\nAllocated resources:\n")
	if !ok {
		return nil, fmt.Errorf("no Allocated resources in:\n%s", describe)
	}
	_, table, ok = strings.Cut(table, "--------")
	if !ok {
		return nil, fmt.Errorf("no table header in Allocated resources:\n%s", table)
	}
	out := map[string]resource.Quantity{}
	for _, line := range strings.Split(table, "\n")[1:] {
		if !strings.HasPrefix(line, " ") { // the next section (Events:)
			break
		}
		cols := strings.Fields(line)
		if len(cols) < 3 {
			return nil, fmt.Errorf("allocated resources row %q", line)
		}
		q, err := resource.ParseQuantity(cols[1])
		if err != nil {
			return nil, fmt.Errorf("allocated resources row %q: %w", line, err)
		}
		out[cols[0]] = q
	}
	return out, nil
}

// freeGPUNodes waits until kubectl get nc --field-selector freeGPUs lists
// want, and checks that want are the nodes whose allocatable GPUs kubectl
// describe node does not show allocated.
func (e *env) freeGPUNodes(t *testing.T, nodes []string, want ...string) {
	t.Helper()
	var free []string
	for _, node := range nodes {
		n, err := e.kube.CoreV1().Nodes().Get(t.Context(), node, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		described, err := allocatedResources(e.kubectl(t, "describe", "node", node))
		if err != nil {
			t.Fatal(err)
		}
		left := n.Status.Allocatable[gpu]
		left.Sub(described[gpu])
		if left.Sign() != 0 {
			free = append(free, "local."+node)
		}
	}
	if !slices.Equal(free, want) {
		t.Fatalf("nodes with a free GPU by kubectl describe node: %v, want %v", free, want)
	}
	eventually(t, "kubectl get nc --field-selector "+freeGPUs+" lists "+strings.Join(want, ", "), mirrorTimeout, func(ctx context.Context) (bool, string) {
		out, _, err := e.cp.Kubectl(ctx, "get", "nc", "--field-selector", freeGPUs, "-o", "custom-columns=NAME:.metadata.name", "--no-headers")
		if err != nil {
			return false, err.Error()
		}
		return slices.Equal(strings.Fields(out), want), out
	})
}
