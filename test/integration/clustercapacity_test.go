package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/example/platform-apiserver/pkg/apis/platform/v1alpha1"
	"github.com/example/platform-apiserver/pkg/registry"
	"github.com/example/platform-apiserver/test/framework"
)

// TestClusterCapacity: with two members, each ClusterCapacity equals the sum
// over its member's NodeCapacities after node creates, cordons, taints, pod
// churn and node deletion — at every resourceVersion a watcher of both
// kinds sees, not only once things settle — and its pods and namespaces
// match the member's ClusterNamespaces.
func TestClusterCapacity(t *testing.T) {
	t.Parallel()
	second := framework.ForTest(t, framework.Options{PlatformAPIServerBinary: os.Getenv("PLATFORM_APISERVER_BINARY")})
	dir := t.TempDir()
	e := newMembersEnv(t, dir)
	copyFile(t, second.AdminKubeconfig(), filepath.Join(dir, "second"))
	members := map[string]kubernetes.Interface{"local": e.kube, "second": kubernetes.NewForConfigOrDie(second.AdminConfig())}
	eventually(t, "a ClusterCapacity per member", mirrorTimeout, func(ctx context.Context) (bool, string) {
		list, err := e.platform.PlatformV1alpha1().ClusterCapacities().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		var names []string
		for _, c := range list.Items {
			names = append(names, c.Name)
		}
		return slices.Contains(names, "local") && slices.Contains(names, "second"), fmt.Sprint(names)
	})
	rec := e.recordCapacity(t)

	// Each step runs in both members, then waits until both
	// ClusterCapacities show it (done), so every step is its own change.
	steps := []struct {
		name string
		run  func(t *testing.T, kube kubernetes.Interface)
		done func(s v1alpha1.ClusterCapacityStatus) bool
	}{
		{"three nodes", func(t *testing.T, kube kubernetes.Interface) {
			for _, n := range []string{"cap-1", "cap-2", "cap-3"} {
				createNode(t, kube, n)
			}
		}, func(s v1alpha1.ClusterCapacityStatus) bool { return s.Nodes.Schedulable == 3 }},
		{"pods, one pending", func(t *testing.T, kube kubernetes.Interface) {
			create(t, kube.CoreV1().Namespaces().Create, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "cap"}})
			for _, p := range []*corev1.Pod{
				testPod("cap", "p1", "cap-1", "1", "1Gi"),
				testPod("cap", "p2", "cap-2", "500m", "512Mi"),
				testPod("cap", "p3", "", "250m", "256Mi"),
			} {
				create(t, kube.CoreV1().Pods("cap").Create, p)
			}
		}, func(s v1alpha1.ClusterCapacityStatus) bool { return s.All.Requested.Pods == 2 }},
		{"cordon", func(t *testing.T, kube kubernetes.Interface) {
			patchNode(t, kube, "cap-2", `{"spec":{"unschedulable":true}}`)
		}, func(s v1alpha1.ClusterCapacityStatus) bool { return s.Nodes.Cordoned == 1 }},
		{"taint", func(t *testing.T, kube kubernetes.Interface) {
			patchNode(t, kube, "cap-3", `{"spec":{"taints":[{"key":"dedicated","value":"batch","effect":"NoExecute"}]}}`)
		}, func(s v1alpha1.ClusterCapacityStatus) bool { return s.Nodes.Tainted == 1 }},
		{"pod churn", func(t *testing.T, kube kubernetes.Interface) {
			p1, err := kube.CoreV1().Pods("cap").Get(t.Context(), "p1", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			p1.Status.Phase = corev1.PodSucceeded
			if _, err := kube.CoreV1().Pods("cap").UpdateStatus(t.Context(), p1, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			if err := kube.CoreV1().Pods("cap").Delete(t.Context(), "p2", metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
				t.Fatal(err)
			}
			create(t, kube.CoreV1().Pods("cap").Create, testPod("cap", "p4", "cap-3", "2", "2Gi"))
		}, func(s v1alpha1.ClusterCapacityStatus) bool {
			return s.All.Requested.Pods == 1 && s.All.Requested.CPU.MilliValue() == 2000
		}},
		{"GPUs on two nodes, a pod requesting three", func(t *testing.T, kube kubernetes.Interface) {
			for node, gpus := range map[string]string{"cap-1": "8", "cap-3": "4"} {
				patch := fmt.Sprintf(`{"status":{"capacity":{"nvidia.com/gpu":%[1]q},"allocatable":{"nvidia.com/gpu":%[1]q}}}`, gpus)
				if _, err := kube.CoreV1().Nodes().PatchStatus(t.Context(), node, []byte(patch)); err != nil {
					t.Fatal(err)
				}
			}
			p := testPod("cap", "p5", "cap-1", "100m", "128Mi")
			gpus := corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("3")}
			p.Spec.Containers[0].Resources.Requests["nvidia.com/gpu"] = gpus["nvidia.com/gpu"]
			p.Spec.Containers[0].Resources.Limits = gpus
			create(t, kube.CoreV1().Pods("cap").Create, p)
		}, func(s v1alpha1.ClusterCapacityStatus) bool {
			gpus := s.All.Requested.Other["nvidia.com/gpu"]
			return s.Nodes.WithResource["nvidia.com/gpu"] == 2 && gpus.Value() == 3
		}},
		{"node deletion and a new node", func(t *testing.T, kube kubernetes.Interface) {
			if err := kube.CoreV1().Nodes().Delete(t.Context(), "cap-1", metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			createNode(t, kube, "cap-4")
		}, func(s v1alpha1.ClusterCapacityStatus) bool {
			// cap-2 cordoned, cap-3 tainted (with GPUs), cap-4 schedulable
			return reflect.DeepEqual(s.Nodes, v1alpha1.NodeCounts{Total: 3, Ready: 3, Schedulable: 1, Cordoned: 1, Tainted: 1,
				WithResource: map[string]int64{"nvidia.com/gpu": 1}})
		}},
	}
	for _, step := range steps {
		for _, id := range []string{"local", "second"} {
			step.run(t, members[id])
		}
		for _, id := range []string{"local", "second"} {
			eventually(t, step.name+" in "+id, mirrorTimeout, func(ctx context.Context) (bool, string) {
				c, err := e.platform.PlatformV1alpha1().ClusterCapacities().Get(ctx, id, metav1.GetOptions{})
				if err != nil {
					return false, err.Error()
				}
				return step.done(c.Status), fmt.Sprintf("%+v", c.Status)
			})
		}
	}
	rec.check(t, e, 2*len(steps))

	e.kubectl(t, "wait", "--for=condition=HasSchedulableCapacity", "clustercapacity/second", "--timeout=30s")
	e.kubectl(t, "wait", "--for=condition=Synced", "clustercapacity/local", "clustercapacity/second", "--timeout=30s")
	out := e.kubectl(t, "get", "clustercapacities")
	if got := row(t, out, "second"); got[1] != "1/3" || got[4] != "3920m, 7Gi" || !strings.HasPrefix(got[6], "Synced (") {
		t.Errorf("kubectl get clustercapacities: second = %q, want 1/3 schedulable, cap-4's 3920m, 7Gi free, Synced\n%s", got, out)
	}
}

func createNode(t *testing.T, kube kubernetes.Interface, name string) {
	t.Helper()
	create(t, kube.CoreV1().Nodes().Create, testNode(name))
	// Admission taints a new node not-ready; no node lifecycle controller runs to lift it.
	patchNode(t, kube, name, `{"spec":{"taints":null}}`)
}

func patchNode(t *testing.T, kube kubernetes.Interface, name, patch string) {
	t.Helper()
	if _, err := kube.CoreV1().Nodes().Patch(t.Context(), name, "application/merge-patch+json", []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

func create[T any](t *testing.T, fn func(context.Context, T, metav1.CreateOptions) (T, error), obj T) {
	t.Helper()
	if _, err := fn(t.Context(), obj, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// capacityRecorder holds the state of both kinds at one resourceVersion and
// every event of a watch of each from it.
type capacityRecorder struct {
	start  int64
	nodes  []v1alpha1.NodeCapacity
	ccs    []v1alpha1.ClusterCapacity
	mu     sync.Mutex
	events []watch.Event
	errs   []error
}

// recordCapacity lists NodeCapacities and ClusterCapacities until both lists
// come from the same registry version, then watches both from it.
func (e *env) recordCapacity(t *testing.T) *capacityRecorder {
	t.Helper()
	ctx := t.Context()
	api := e.platform.PlatformV1alpha1()
	rec := &capacityRecorder{}
	eventually(t, "lists of both kinds at one resourceVersion", mirrorTimeout, func(ctx context.Context) (bool, string) {
		nodes, err := api.NodeCapacities().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		ccs, err := api.ClusterCapacities().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		rec.nodes, rec.ccs = nodes.Items, ccs.Items
		rv, err := registry.ParseResourceVersion(nodes.ResourceVersion)
		if err != nil {
			return false, err.Error()
		}
		rec.start = rv
		return nodes.ResourceVersion == ccs.ResourceVersion, nodes.ResourceVersion + " " + ccs.ResourceVersion
	})
	from := metav1.ListOptions{ResourceVersion: fmt.Sprint(rec.start)}
	nw, err := api.NodeCapacities().Watch(ctx, from)
	if err != nil {
		t.Fatal(err)
	}
	cw, err := api.ClusterCapacities().Watch(ctx, from)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []watch.Interface{nw, cw} {
		t.Cleanup(w.Stop)
		go func() {
			for ev := range w.ResultChan() {
				rec.mu.Lock()
				if ev.Type == watch.Error {
					rec.errs = append(rec.errs, apierrors.FromObject(ev.Object))
				} else {
					rec.events = append(rec.events, ev)
				}
				rec.mu.Unlock()
			}
		}()
	}
	return rec
}

// check waits until the watches caught up with a list of both kinds, then
// replays the events of both in resourceVersion order: at the version of
// every ClusterCapacity event, the replayed NodeCapacities of its member
// must sum to it. The final state's pods and namespaces must match the
// members' ClusterNamespaces.
func (rec *capacityRecorder) check(t *testing.T, e *env, atLeast int) {
	t.Helper()
	api := e.platform.PlatformV1alpha1()
	var events []watch.Event
	eventually(t, "the watches caught up with the lists", mirrorTimeout, func(ctx context.Context) (bool, string) {
		nodes, err := api.NodeCapacities().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		ccs, err := api.ClusterCapacities().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		rec.mu.Lock()
		events = slices.Clone(rec.events)
		errs := rec.errs
		rec.mu.Unlock()
		if len(errs) > 0 {
			t.Fatalf("watch errors: %v", errs)
		}
		n, c := rec.replay(events, nil)
		return sameVersions(n, nodes.Items) && sameVersions(c, ccs.Items),
			fmt.Sprintf("%d events; replayed %d nodes and %d capacities, listed %d and %d", len(events), len(n), len(c), len(nodes.Items), len(ccs.Items))
	})
	checked := 0
	rec.replay(events, func(at int64, cc *v1alpha1.ClusterCapacity, nodes map[string]*v1alpha1.NodeCapacity) {
		checked++
		var member []v1alpha1.NodeCapacity
		for _, n := range nodes {
			if n.Status.Cluster == cc.Name {
				member = append(member, *n)
			}
		}
		if got, want := capacityOf(cc), sumNodeCapacities(member); !reflect.DeepEqual(got, want) {
			t.Errorf("at resourceVersion %d, ClusterCapacity %s\n%+v\nthe sum of its %d NodeCapacities then\n%+v", at, cc.Name, got, len(member), want)
		}
	})
	if checked < atLeast {
		t.Errorf("checked the sum at %d ClusterCapacity versions, want at least %d", checked, atLeast)
	}

	for _, id := range []string{"local", "second"} {
		cc, err := api.ClusterCapacities().Get(t.Context(), id, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		nss, err := api.ClusterNamespaces("").List(t.Context(), metav1.ListOptions{FieldSelector: "status.cluster=" + id})
		if err != nil {
			t.Fatal(err)
		}
		var pods int64
		for _, ns := range nss.Items {
			pods += ns.Status.PodCount
		}
		if cc.Status.Pods != pods || cc.Status.Namespaces != int64(len(nss.Items)) {
			t.Errorf("%s: pods %d, namespaces %d; its ClusterNamespaces hold %d pods in %d", id, cc.Status.Pods, cc.Status.Namespaces, pods, len(nss.Items))
		}
	}
}

// replay applies the initial lists and then events in resourceVersion
// order, calling at (when set) with the state at each ClusterCapacity event.
func (rec *capacityRecorder) replay(events []watch.Event, at func(int64, *v1alpha1.ClusterCapacity, map[string]*v1alpha1.NodeCapacity)) (map[string]*v1alpha1.NodeCapacity, map[string]*v1alpha1.ClusterCapacity) {
	nodes := map[string]*v1alpha1.NodeCapacity{}
	for i := range rec.nodes {
		nodes[rec.nodes[i].Name] = &rec.nodes[i]
	}
	ccs := map[string]*v1alpha1.ClusterCapacity{}
	for i := range rec.ccs {
		ccs[rec.ccs[i].Name] = &rec.ccs[i]
	}
	type versioned struct {
		rv int64
		ev watch.Event
	}
	var ordered []versioned
	for _, ev := range events {
		if ev.Type == watch.Bookmark {
			continue
		}
		obj := ev.Object
		if co, ok := obj.(runtime.CacheableObject); ok {
			obj = co.GetObject()
		}
		var rv string
		switch o := obj.(type) {
		case *v1alpha1.NodeCapacity:
			rv = o.ResourceVersion
		case *v1alpha1.ClusterCapacity:
			rv = o.ResourceVersion
		}
		v, _ := registry.ParseResourceVersion(rv)
		ordered = append(ordered, versioned{v, watch.Event{Type: ev.Type, Object: obj}})
	}
	slices.SortFunc(ordered, func(a, b versioned) int { return int(a.rv - b.rv) })
	for _, v := range ordered {
		switch o := v.ev.Object.(type) {
		case *v1alpha1.NodeCapacity:
			if v.ev.Type == watch.Deleted {
				delete(nodes, o.Name)
			} else {
				nodes[o.Name] = o
			}
		case *v1alpha1.ClusterCapacity:
			if v.ev.Type == watch.Deleted {
				delete(ccs, o.Name)
				continue
			}
			ccs[o.Name] = o
			if at != nil {
				at(v.rv, o, nodes)
			}
		}
	}
	return nodes, ccs
}

// sameVersions tells whether replayed objects are exactly those listed, at the same versions.
func sameVersions[T metav1.Object, L any](replayed map[string]T, listed []L) bool {
	if len(replayed) != len(listed) {
		return false
	}
	for i := range listed {
		m, ok := any(&listed[i]).(metav1.Object)
		if !ok {
			return false
		}
		r, found := replayed[m.GetName()]
		if !found || r.GetResourceVersion() != m.GetResourceVersion() {
			return false
		}
	}
	return true
}

// nodeSums is what a ClusterCapacity says of its nodes, in plain numbers.
type nodeSums struct {
	Counts                    v1alpha1.NodeCounts
	All, Schedulable          [3]int64 // allocatable CPU millis, memory, pods
	AllReq, SchedulableReq    [3]int64 // requested
	UsageNodes                int64
	HasLargestFree            bool
	LargestFreeCPU, LargestMi int64
	// Other resources (nvidia.com/gpu ...): the same sums, and the most
	// of each free on one schedulable node that lists it.
	AllOther, SchedulableOther, AllReqOther, SchedulableReqOther, LargestFreeOther map[string]int64
}

// amounts is other resources in plain numbers, nil for none.
func amounts(other map[string]resource.Quantity) map[string]int64 {
	if len(other) == 0 {
		return nil
	}
	out := make(map[string]int64, len(other))
	for name, q := range other {
		out[name] = q.Value()
	}
	return out
}

// addAmounts adds other to *to, dropping sums of zero as the registry does.
func addAmounts(to *map[string]int64, other map[string]resource.Quantity) {
	for name, q := range other {
		if *to == nil {
			*to = map[string]int64{}
		}
		(*to)[name] += q.Value()
		if (*to)[name] == 0 {
			delete(*to, name)
		}
	}
	if len(*to) == 0 {
		*to = nil
	}
}

func capacityOf(cc *v1alpha1.ClusterCapacity) nodeSums {
	s := cc.Status
	triple := func(r v1alpha1.NodeResources) [3]int64 { return [3]int64{r.CPU.MilliValue(), r.Memory.Value(), r.Pods} }
	out := nodeSums{Counts: s.Nodes, All: triple(s.All.Allocatable), Schedulable: triple(s.Schedulable.Allocatable),
		AllReq: triple(s.All.Requested), SchedulableReq: triple(s.Schedulable.Requested),
		AllOther: amounts(s.All.Allocatable.Other), SchedulableOther: amounts(s.Schedulable.Allocatable.Other),
		AllReqOther: amounts(s.All.Requested.Other), SchedulableReqOther: amounts(s.Schedulable.Requested.Other)}
	if len(out.Counts.WithResource) == 0 {
		out.Counts.WithResource = nil
	}
	if s.All.Usage != nil {
		out.UsageNodes = s.All.Usage.Nodes
	}
	if f := s.LargestFree; f != nil {
		out.HasLargestFree, out.LargestFreeCPU, out.LargestMi = true, f.CPU.MilliValue(), f.Memory.Value()
		out.LargestFreeOther = amounts(f.Other)
	}
	return out
}

func sumNodeCapacities(nodes []v1alpha1.NodeCapacity) nodeSums {
	var out nodeSums
	add := func(to *[3]int64, r v1alpha1.NodeResources) {
		to[0] += r.CPU.MilliValue()
		to[1] += r.Memory.Value()
		to[2] += r.Pods
	}
	for _, n := range nodes {
		s := n.Status
		out.Counts.Total++
		if s.Ready {
			out.Counts.Ready++
		}
		if s.Unschedulable {
			out.Counts.Cordoned++
		}
		if slices.ContainsFunc(s.Taints, func(t v1alpha1.Taint) bool { return t.Effect == "NoSchedule" || t.Effect == "NoExecute" }) {
			out.Counts.Tainted++
		}
		if s.Usage != nil {
			out.UsageNodes++
		}
		add(&out.All, s.Allocatable)
		add(&out.AllReq, s.Requested)
		addAmounts(&out.AllOther, s.Allocatable.Other)
		addAmounts(&out.AllReqOther, s.Requested.Other)
		for name := range s.Allocatable.Other {
			if out.Counts.WithResource == nil {
				out.Counts.WithResource = map[string]int64{}
			}
			out.Counts.WithResource[name]++
		}
		if !s.Schedulable {
			continue
		}
		out.Counts.Schedulable++
		add(&out.Schedulable, s.Allocatable)
		add(&out.SchedulableReq, s.Requested)
		addAmounts(&out.SchedulableOther, s.Allocatable.Other)
		addAmounts(&out.SchedulableReqOther, s.Requested.Other)
		for name, q := range s.Available.Other {
			if _, listed := s.Allocatable.Other[name]; !listed {
				continue
			}
			if out.LargestFreeOther == nil {
				out.LargestFreeOther = map[string]int64{}
			}
			if v, seen := out.LargestFreeOther[name]; !seen || q.Value() > v {
				out.LargestFreeOther[name] = q.Value()
			}
		}
		cpu, mem := s.Available.CPU.MilliValue(), s.Available.Memory.Value()
		if out.HasLargestFree {
			cpu, mem = max(cpu, out.LargestFreeCPU), max(mem, out.LargestMi)
		}
		out.HasLargestFree, out.LargestFreeCPU, out.LargestMi = true, cpu, mem
	}
	return out
}
