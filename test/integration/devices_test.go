package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/example/platform-apiserver/pkg/apis/platform/v1alpha1"
	"github.com/example/platform-apiserver/test/framework"
)

const draDriver = "gpu.example.com"

// TestDevices: a member's DRA devices — ResourceSlices written as a driver
// writes them, ResourceClaims allocated to bound pods as the scheduler
// allocates them — show per node (NodeCapacity), per namespace
// (ClusterNamespace) and per member (ClusterCapacity), through the
// aggregator, and follow deletions; a second member whose kube-apiserver
// does not serve resource.k8s.io mirrors everything else and says DRA is
// absent.
func TestDevices(t *testing.T) {
	t.Parallel()
	second := framework.ForTest(t, framework.Options{
		PlatformAPIServerBinary: os.Getenv("PLATFORM_APISERVER_BINARY"),
		ExtraKubeAPIServerArgs:  []string{"--runtime-config=resource.k8s.io/v1=false"},
	})
	dir := t.TempDir()
	e := newMembersEnv(t, dir)
	copyFile(t, second.AdminKubeconfig(), filepath.Join(dir, "second"))
	kube := e.kube
	ctx := t.Context()

	for _, n := range []string{"dra-1", "dra-2"} {
		createNode(t, kube, n)
	}
	createNode(t, kubernetes.NewForConfigOrDie(second.AdminConfig()), "plain-1")
	create(t, kube.ResourceV1().DeviceClasses().Create, &resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: draDriver},
		Spec: resourcev1.DeviceClassSpec{Selectors: []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{
			Expression: fmt.Sprintf("device.driver == %q", draDriver)}}}}})
	create(t, kube.ResourceV1().ResourceSlices().Create, gpuSlice("dra-1", 8))
	create(t, kube.ResourceV1().ResourceSlices().Create, gpuSlice("dra-2", 4))
	create(t, kube.CoreV1().Namespaces().Create, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "dra"}})
	create(t, kube.ResourceV1().ResourceClaims("dra").Create, gpuClaim("train", 2))
	create(t, kube.ResourceV1().ResourceClaims("dra").Create, gpuClaim("waiting", 1))
	pod := testPod("dra", "trainer", "dra-1", "100m", "128Mi")
	pod.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpus", ResourceClaimName: new("train")}}
	pod.Spec.Containers[0].Resources.Claims = []corev1.ResourceClaim{{Name: "gpus"}}
	create(t, kube.CoreV1().Pods("dra").Create, pod)
	allocate(t, kube, "train", "trainer", "dra-1", "gpu-0", "gpu-1")

	e.waitDevices(t, "slices, one claim allocated",
		map[string][]v1alpha1.DeviceCount{
			"local.dra-1": {{Driver: draDriver, Total: 8, Allocated: 2, Free: 6}},
			"local.dra-2": {{Driver: draDriver, Total: 4, Allocated: 0, Free: 4}}},
		[]v1alpha1.DeviceClaimCount{{DeviceClassName: draDriver, Claims: 2, AllocatedDevices: 2}},
		&v1alpha1.MemberDevices{API: v1alpha1.DeviceAPIServed,
			Drivers: []v1alpha1.MemberDeviceCount{{Driver: draDriver, Total: 12, Allocated: 2, Free: 10, Nodes: 2}}})
	out := e.kubectl(t, "get", "nodecapacities", "local.dra-1", "-o", "wide")
	if !strings.Contains(out, draDriver+"=6/8") {
		t.Errorf("kubectl get nc -o wide: want %s=6/8 in the Devices column\n%s", draDriver, out)
	}
	// Nodes with free devices of the driver, with exactly six free, and
	// without any (an absent driver is zero).
	for selector, want := range map[string]string{
		"status.devices.free." + draDriver + "!=0":                       "nodecapacity.platform.example.io/local.dra-1\nnodecapacity.platform.example.io/local.dra-2\n",
		"status.devices.free." + draDriver + "=6":                        "nodecapacity.platform.example.io/local.dra-1\n",
		"status.devices.total." + draDriver + "=0,status.cluster=second": "nodecapacity.platform.example.io/second.plain-1\n",
	} {
		eventually(t, "--field-selector "+selector, mirrorTimeout, func(ctx context.Context) (bool, string) {
			got, _, err := e.cp.Kubectl(ctx, "get", "nodecapacities", "--field-selector", selector, "-o", "name")
			return err == nil && got == want, fmt.Sprintf("%q, %v; want %q", got, err, want)
		})
	}

	// The member without resource.k8s.io: its node is mirrored, it is
	// Synced, and its devices say Absent, not unknown.
	e.kubectl(t, "wait", "--for=condition=Synced", "clustercapacity/second", "--timeout=60s")
	eventually(t, "second's DRA API absent and its node mirrored", mirrorTimeout, func(ctx context.Context) (bool, string) {
		cc, err := e.platform.PlatformV1alpha1().ClusterCapacities().Get(ctx, "second", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		_, err = e.platform.PlatformV1alpha1().NodeCapacities().Get(ctx, "second.plain-1", metav1.GetOptions{})
		return err == nil && reflect.DeepEqual(cc.Status.Devices, &v1alpha1.MemberDevices{API: v1alpha1.DeviceAPIAbsent}),
			fmt.Sprintf("devices %+v, node: %v", cc.Status.Devices, err)
	})
	if out := e.kubectl(t, "get", "clustercapacity", "second", "-o", "wide"); !strings.Contains(out, "Absent") {
		t.Errorf("kubectl get clustercapacity second -o wide: want Absent in the Devices column\n%s", out)
	}

	// Deletions: the allocated claim, then one node's slice.
	if err := kube.ResourceV1().ResourceClaims("dra").Delete(ctx, "train", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := kube.ResourceV1().ResourceSlices().Delete(ctx, "dra-2-"+draDriver, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitDevices(t, "the claim and dra-2's slice deleted",
		map[string][]v1alpha1.DeviceCount{"local.dra-1": {{Driver: draDriver, Total: 8, Free: 8}}, "local.dra-2": nil},
		[]v1alpha1.DeviceClaimCount{{DeviceClassName: draDriver, Claims: 1}},
		&v1alpha1.MemberDevices{API: v1alpha1.DeviceAPIServed,
			Drivers: []v1alpha1.MemberDeviceCount{{Driver: draDriver, Total: 8, Free: 8, Nodes: 1}}})
}

// gpuSlice is the ResourceSlice a driver publishes for node: n devices
// gpu-0 to gpu-<n-1> in a pool named after the node.
func gpuSlice(node string, n int) *resourcev1.ResourceSlice {
	s := &resourcev1.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: node + "-" + draDriver},
		Spec: resourcev1.ResourceSliceSpec{Driver: draDriver, NodeName: new(node),
			Pool: resourcev1.ResourcePool{Name: node, Generation: 1, ResourceSliceCount: 1}},
	}
	for i := range n {
		s.Spec.Devices = append(s.Spec.Devices, resourcev1.Device{Name: fmt.Sprintf("gpu-%d", i)})
	}
	return s
}

// gpuClaim is a ResourceClaim of count devices of the driver's class.
func gpuClaim(name string, count int64) *resourcev1.ResourceClaim {
	return &resourcev1.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "dra", Name: name},
		Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{
			Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: draDriver, Count: count}}}}},
	}
}

// allocate writes the claim's status as the scheduler does when it binds
// pod to node: the devices allocated, the node, and the pod reserving it.
func allocate(t *testing.T, kube kubernetes.Interface, claimName, podName, node string, devices ...string) {
	t.Helper()
	ctx := t.Context()
	claim, err := kube.ResourceV1().ResourceClaims("dra").Get(ctx, claimName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod, err := kube.CoreV1().Pods("dra").Get(ctx, podName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	alloc := &resourcev1.AllocationResult{NodeSelector: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
		MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{node}}}}}}}
	for _, d := range devices {
		alloc.Devices.Results = append(alloc.Devices.Results, resourcev1.DeviceRequestAllocationResult{
			Request: "gpu", Driver: draDriver, Pool: node, Device: d})
	}
	claim.Status.Allocation = alloc
	claim.Status.ReservedFor = []resourcev1.ResourceClaimConsumerReference{{Resource: "pods", Name: pod.Name, UID: pod.UID}}
	if _, err := kube.ResourceV1().ResourceClaims("dra").UpdateStatus(ctx, claim, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// waitDevices waits until the nodes' devices (nil: none), namespace dra's
// claims of member local and local's devices are the wanted ones.
func (e *env) waitDevices(t *testing.T, when string, nodes map[string][]v1alpha1.DeviceCount,
	claims []v1alpha1.DeviceClaimCount, member *v1alpha1.MemberDevices) {
	t.Helper()
	eventually(t, when, mirrorTimeout, func(ctx context.Context) (bool, string) {
		api := e.platform.PlatformV1alpha1()
		var diffs []string
		for name, want := range nodes {
			nc, err := api.NodeCapacities().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			if !reflect.DeepEqual(nc.Status.Devices, want) {
				diffs = append(diffs, fmt.Sprintf("%s: %+v, want %+v", name, nc.Status.Devices, want))
			}
		}
		cn, err := api.ClusterNamespaces("dra").Get(ctx, "local", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		if !reflect.DeepEqual(cn.Status.DeviceClaims, claims) {
			diffs = append(diffs, fmt.Sprintf("namespace dra: %+v, want %+v", cn.Status.DeviceClaims, claims))
		}
		cc, err := api.ClusterCapacities().Get(ctx, "local", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		if !reflect.DeepEqual(cc.Status.Devices, member) {
			diffs = append(diffs, fmt.Sprintf("member: %+v, want %+v", cc.Status.Devices, member))
		}
		return len(diffs) == 0, strings.Join(diffs, "; ")
	})
}
