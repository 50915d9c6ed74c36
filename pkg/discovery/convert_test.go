package discovery

import (
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/example/platform-apiserver/pkg/registry/store"
)

func rl(pairs ...string) corev1.ResourceList {
	out := corev1.ResourceList{}
	for i := 0; i < len(pairs); i += 2 {
		out[corev1.ResourceName(pairs[i])] = resource.MustParse(pairs[i+1])
	}
	return out
}

func container(name string, requests corev1.ResourceList) corev1.Container {
	return corev1.Container{Name: name, Resources: corev1.ResourceRequirements{Requests: requests}}
}

func TestConvertPod(t *testing.T) {
	always := corev1.ContainerRestartPolicyAlways
	sidecar := container("sidecar", rl("cpu", "100m", "memory", "64Mi"))
	sidecar.RestartPolicy = &always
	base := corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "web", UID: "u1"},
		Spec:       corev1.PodSpec{NodeName: "node-1"},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning},
	}
	tests := []struct {
		name       string
		mutate     func(p *corev1.Pod)
		wantOK     bool
		wantCPU    int64
		wantMem    int64
		wantOther  map[string]int64
		wantIssues int
	}{
		{name: "containers summed", wantOK: true, wantCPU: 350, wantMem: 384 << 20, mutate: func(p *corev1.Pod) {
			p.Spec.Containers = []corev1.Container{
				container("a", rl("cpu", "250m", "memory", "256Mi")),
				container("b", rl("cpu", "0.1", "memory", "128Mi")),
			}
		}},
		{name: "init container larger than the sum wins", wantOK: true, wantCPU: 2000, wantMem: 256 << 20, mutate: func(p *corev1.Pod) {
			p.Spec.Containers = []corev1.Container{container("a", rl("cpu", "500m", "memory", "256Mi"))}
			p.Spec.InitContainers = []corev1.Container{container("init", rl("cpu", "2", "memory", "1Mi"))}
		}},
		{name: "sidecar adds, overhead adds", wantOK: true, wantCPU: 500 + 100 + 50, wantMem: (256 + 64 + 32) << 20, mutate: func(p *corev1.Pod) {
			p.Spec.Containers = []corev1.Container{container("a", rl("cpu", "500m", "memory", "256Mi"))}
			p.Spec.InitContainers = []corev1.Container{sidecar}
			p.Spec.Overhead = rl("cpu", "50m", "memory", "32Mi")
		}},
		{name: "exponent and decimal suffixes", wantOK: true, wantCPU: 1500, wantMem: 2_000_000_000, mutate: func(p *corev1.Pod) {
			p.Spec.Containers = []corev1.Container{container("a", rl("cpu", "1500000u", "memory", "2e9"))}
		}},
		{name: "every other resource, as the scheduler sums it", wantOK: true, wantCPU: 1000,
			wantOther: map[string]int64{"nvidia.com/gpu": 2, "ephemeral-storage": 3 << 30, "hugepages-2Mi": 64 << 20}, mutate: func(p *corev1.Pod) {
				p.Spec.Containers = []corev1.Container{
					container("a", rl("cpu", "1", "nvidia.com/gpu", "1", "ephemeral-storage", "1Gi", "hugepages-2Mi", "64Mi")),
					container("b", rl("nvidia.com/gpu", "1", "ephemeral-storage", "1Gi")),
				}
				// The init container's 3Gi is more than the containers' 2Gi.
				p.Spec.InitContainers = []corev1.Container{container("init", rl("ephemeral-storage", "3Gi"))}
			}},
		{name: "no requests", wantOK: true, mutate: func(p *corev1.Pod) {
			p.Spec.Containers = []corev1.Container{container("a", nil)}
		}},
		{name: "unscheduled pending pod is kept", wantOK: true, wantCPU: 100, mutate: func(p *corev1.Pod) {
			p.Spec.NodeName = ""
			p.Status.Phase = corev1.PodPending
			p.Spec.Containers = []corev1.Container{container("a", rl("cpu", "100m"))}
		}},
		{name: "succeeded pod is terminal", mutate: func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }},
		{name: "failed pod is terminal", mutate: func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed }},
		{name: "quantity beyond int64 is an issue, not a crash", wantOK: true, wantMem: 1 << 20, wantIssues: 1, mutate: func(p *corev1.Pod) {
			p.Spec.Containers = []corev1.Container{container("a", rl("cpu", "1e30", "memory", "1Mi"))}
		}},
		{name: "negative quantity is an issue", wantOK: true, wantCPU: 100, wantIssues: 1, mutate: func(p *corev1.Pod) {
			p.Spec.Containers = []corev1.Container{container("a", rl("cpu", "100m", "memory", "-1Ki"))}
		}},
		{name: "unknown phase is an issue, counted as non-terminal", wantOK: true, wantIssues: 1, mutate: func(p *corev1.Pod) {
			p.Status.Phase = "Evicted"
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := base.DeepCopy()
			tc.mutate(p)
			rec, ok, issues := convertPod(p)
			if ok != tc.wantOK {
				t.Fatalf("ok = %v, want %v", ok, tc.wantOK)
			}
			if len(issues) != tc.wantIssues {
				t.Errorf("issues = %v, want %d", issues, tc.wantIssues)
			}
			if !ok {
				return
			}
			if rec.CPURequestMillis != tc.wantCPU || rec.MemoryRequestBytes != tc.wantMem {
				t.Errorf("requests = %dm %dB, want %dm %dB", rec.CPURequestMillis, rec.MemoryRequestBytes, tc.wantCPU, tc.wantMem)
			}
			if !reflect.DeepEqual(rec.OtherRequests, tc.wantOther) {
				t.Errorf("other requests = %v, want %v", rec.OtherRequests, tc.wantOther)
			}
			if rec.Namespace != p.Namespace || rec.Name != p.Name || rec.UID != string(p.UID) || rec.NodeName != p.Spec.NodeName || rec.Phase != string(p.Status.Phase) {
				t.Errorf("identity fields = %+v", rec)
			}
		})
	}
}

func TestConvertNode(t *testing.T) {
	created := metav1.NewTime(time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC))
	transition := metav1.NewTime(created.Add(time.Minute))
	base := corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "node-1", UID: "n1", Labels: map[string]string{"zone": "a"}, CreationTimestamp: created},
		Status: corev1.NodeStatus{
			Capacity:    rl("cpu", "4", "memory", "16Gi", "pods", "110"),
			Allocatable: rl("cpu", "3920m", "memory", "15Gi", "pods", "110"),
			Conditions: []corev1.NodeCondition{
				{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse, LastTransitionTime: transition},
				{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", Message: "ok", LastTransitionTime: transition},
			},
		},
	}
	tests := []struct {
		name       string
		mutate     func(n *corev1.Node)
		want       func(n *store.Node)
		wantIssues int
	}{
		{name: "ready node", mutate: func(*corev1.Node) {}, want: func(*store.Node) {}},
		{name: "cordoned", mutate: func(n *corev1.Node) { n.Spec.Unschedulable = true }, want: func(n *store.Node) { n.Unschedulable = true }},
		{name: "not ready", mutate: func(n *corev1.Node) { n.Status.Conditions[1].Status = corev1.ConditionUnknown },
			want: func(n *store.Node) { n.Ready = false; n.Conditions[1].Status = "Unknown" }},
		{name: "tainted", mutate: func(n *corev1.Node) {
			n.Spec.Taints = []corev1.Taint{{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}}
		}, want: func(n *store.Node) { n.Taints = []store.Taint{{Key: "dedicated", Value: "gpu", Effect: "NoSchedule"}} }},
		{name: "unknown taint effect kept, reported", wantIssues: 1, mutate: func(n *corev1.Node) {
			n.Spec.Taints = []corev1.Taint{{Key: "x", Effect: "Sometimes"}}
		}, want: func(n *store.Node) { n.Taints = []store.Taint{{Key: "x", Effect: "Sometimes"}} }},
		{name: "NUL in a condition message replaced, reported", wantIssues: 1, mutate: func(n *corev1.Node) {
			n.Status.Conditions[1].Message = "disk\x00full"
		}, want: func(n *store.Node) { n.Conditions[1].Message = "disk\uFFFDfull" }},
		{name: "every other resource, in its unit", mutate: func(n *corev1.Node) {
			n.Status.Capacity = rl("cpu", "4", "memory", "16Gi", "pods", "110", "nvidia.com/gpu", "8", "ephemeral-storage", "100Gi", "hugepages-2Mi", "1Gi")
			n.Status.Allocatable = rl("cpu", "3920m", "memory", "15Gi", "pods", "110", "nvidia.com/gpu", "8", "ephemeral-storage", "95Gi", "hugepages-2Mi", "1Gi")
		}, want: func(n *store.Node) {
			n.Capacity.Other = map[string]int64{"nvidia.com/gpu": 8, "ephemeral-storage": 100 << 30, "hugepages-2Mi": 1 << 30}
			n.Allocatable.Other = map[string]int64{"nvidia.com/gpu": 8, "ephemeral-storage": 95 << 30, "hugepages-2Mi": 1 << 30}
		}},
		{name: "unusable extended resource left out, reported", wantIssues: 1, mutate: func(n *corev1.Node) {
			n.Status.Allocatable = rl("cpu", "3920m", "memory", "15Gi", "pods", "110", "example.com/fpga", "-1", "nvidia.com/gpu", "2")
		}, want: func(n *store.Node) { n.Allocatable.Other = map[string]int64{"nvidia.com/gpu": 2} }},
		{name: "malformed allocatable memory zeroed, reported", wantIssues: 1, mutate: func(n *corev1.Node) {
			n.Status.Allocatable = rl("cpu", "3920m", "memory", "1e40", "pods", "110")
		}, want: func(n *store.Node) { n.Allocatable.MemoryBytes = 0 }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n := base.DeepCopy()
			tc.mutate(n)
			want := store.Node{
				Name: "node-1", UID: "n1", Labels: map[string]string{"zone": "a"}, CreatedAt: created.Time,
				Capacity:    store.Quantities{CPUMillis: 4000, MemoryBytes: 16 << 30, Pods: 110},
				Allocatable: store.Quantities{CPUMillis: 3920, MemoryBytes: 15 << 30, Pods: 110},
				Ready:       true,
				Conditions: []store.NodeCondition{
					{Type: "MemoryPressure", Status: "False", LastTransitionTime: transition.Time},
					{Type: "Ready", Status: "True", Reason: "KubeletReady", Message: "ok", LastTransitionTime: transition.Time},
				},
			}
			tc.want(&want)
			got, issues := convertNode(n)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("got  %+v\nwant %+v", got, want)
			}
			if len(issues) != tc.wantIssues {
				t.Errorf("issues = %v, want %d", issues, tc.wantIssues)
			}
		})
	}
}

func TestConvertNamespace(t *testing.T) {
	tests := []struct {
		name       string
		phase      corev1.NamespacePhase
		wantPhase  string
		wantIssues int
	}{
		{name: "active", phase: corev1.NamespaceActive, wantPhase: "Active"},
		{name: "terminating", phase: corev1.NamespaceTerminating, wantPhase: "Terminating"},
		{name: "empty defaults to active", wantPhase: "Active"},
		{name: "unknown kept, reported", phase: "Archived", wantPhase: "Archived", wantIssues: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a", UID: "x", Labels: map[string]string{"a": "b"}},
				Status: corev1.NamespaceStatus{Phase: tc.phase}}
			got, issues := convertNamespace(ns)
			if got.Phase != tc.wantPhase || got.Name != "team-a" || got.UID != "x" || got.Labels["a"] != "b" {
				t.Errorf("got %+v", got)
			}
			if len(issues) != tc.wantIssues {
				t.Errorf("issues = %v, want %d", issues, tc.wantIssues)
			}
		})
	}
}

func TestConvertQuota(t *testing.T) {
	tests := []struct {
		name     string
		spec     corev1.ResourceList
		status   corev1.ResourceQuotaStatus
		wantHard map[string]string
		wantUsed map[string]string
	}{
		{name: "status wins", spec: rl("cpu", "10"), status: corev1.ResourceQuotaStatus{Hard: rl("cpu", "8"), Used: rl("cpu", "1500m")},
			wantHard: map[string]string{"cpu": "8"}, wantUsed: map[string]string{"cpu": "1500m"}},
		{name: "spec until the controller fills status", spec: rl("requests.memory", "1Gi", "pods", "10"),
			wantHard: map[string]string{"requests.memory": "1Gi", "pods": "10"}},
		{name: "canonical strings", status: corev1.ResourceQuotaStatus{Hard: rl("memory", "1024Mi"), Used: rl("cpu", "0.5")},
			wantHard: map[string]string{"memory": "1Gi"}, wantUsed: map[string]string{"cpu": "500m"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			q := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "q"},
				Spec: corev1.ResourceQuotaSpec{Hard: tc.spec}, Status: tc.status}
			got := convertQuota(q)
			if got.Namespace != "team-a" || got.Name != "q" || !reflect.DeepEqual(got.Hard, tc.wantHard) || !reflect.DeepEqual(got.Used, tc.wantUsed) {
				t.Errorf("got %+v, want hard %v used %v", got, tc.wantHard, tc.wantUsed)
			}
		})
	}
}

// TestConvertQuotaScopes: spec.scopes, then the scope selector's
// expressions, each with its values.
func TestConvertQuotaScopes(t *testing.T) {
	q := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "q"},
		Spec: corev1.ResourceQuotaSpec{
			Scopes: []corev1.ResourceQuotaScope{corev1.ResourceQuotaScopeNotBestEffort},
			ScopeSelector: &corev1.ScopeSelector{MatchExpressions: []corev1.ScopedResourceSelectorRequirement{
				{ScopeName: corev1.ResourceQuotaScopePriorityClass, Operator: corev1.ScopeSelectorOpIn, Values: []string{"high", "low"}},
				{ScopeName: corev1.ResourceQuotaScopeCrossNamespacePodAffinity, Operator: corev1.ScopeSelectorOpExists},
			}},
		}}
	want := []string{"NotBestEffort", "PriorityClass In high,low", "CrossNamespacePodAffinity Exists"}
	if got := convertQuota(q).Scopes; !reflect.DeepEqual(got, want) {
		t.Errorf("scopes %q, want %q", got, want)
	}
	if got := convertQuota(&corev1.ResourceQuota{}).Scopes; got != nil {
		t.Errorf("a quota without scopes has scopes %q", got)
	}
}

func TestConvertResourceSlice(t *testing.T) {
	base := resourcev1.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "node-1-gpu.example.com-x7k2p"},
		Spec: resourcev1.ResourceSliceSpec{
			Driver:   "gpu.example.com",
			Pool:     resourcev1.ResourcePool{Name: "node-1", Generation: 3, ResourceSliceCount: 1},
			NodeName: new("node-1"),
			Devices:  []resourcev1.Device{{Name: "gpu-0"}, {Name: "gpu-1"}},
		},
	}
	tests := []struct {
		name       string
		mutate     func(s *resourcev1.ResourceSlice)
		want       func(s *store.ResourceSlice)
		wantIssues int
	}{
		{name: "node-local", mutate: func(*resourcev1.ResourceSlice) {}, want: func(*store.ResourceSlice) {}},
		{name: "all nodes count for the member", mutate: func(s *resourcev1.ResourceSlice) {
			s.Spec.NodeName, s.Spec.AllNodes = nil, new(true)
		}, want: func(s *store.ResourceSlice) { s.NodeName = "" }},
		{name: "node selector counts for the member", mutate: func(s *resourcev1.ResourceSlice) {
			s.Spec.NodeName = nil
			s.Spec.NodeSelector = &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "rack", Operator: corev1.NodeSelectorOpIn, Values: []string{"r1"}}},
			}}}
		}, want: func(s *store.ResourceSlice) { s.NodeName = "" }},
		{name: "per-device node selection counts for the member", mutate: func(s *resourcev1.ResourceSlice) {
			s.Spec.NodeName, s.Spec.PerDeviceNodeSelection = nil, new(true)
			s.Spec.Devices[0].NodeName = new("node-1")
			s.Spec.Devices[1].AllNodes = new(true)
		}, want: func(s *store.ResourceSlice) { s.NodeName = "" }},
		{name: "shared counters only: no devices", mutate: func(s *resourcev1.ResourceSlice) {
			s.Spec.Devices = nil
			s.Spec.SharedCounters = []resourcev1.CounterSet{{Name: "mem"}}
		}, want: func(s *store.ResourceSlice) { s.Devices = nil }},
		{name: "no node selection known counts for the member, reported", wantIssues: 1, mutate: func(s *resourcev1.ResourceSlice) {
			s.Spec.NodeName = new("")
		}, want: func(s *store.ResourceSlice) { s.NodeName = "" }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := base.DeepCopy()
			tc.mutate(s)
			want := store.ResourceSlice{Name: "node-1-gpu.example.com-x7k2p", NodeName: "node-1", Driver: "gpu.example.com",
				Pool: "node-1", PoolGeneration: 3, Devices: []string{"gpu-0", "gpu-1"}}
			tc.want(&want)
			got, issues := convertResourceSlice(s)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("got  %+v\nwant %+v", got, want)
			}
			if len(issues) != tc.wantIssues {
				t.Errorf("issues = %v, want %d", issues, tc.wantIssues)
			}
		})
	}
}

func TestConvertResourceClaim(t *testing.T) {
	exactly := func(name, class string) resourcev1.DeviceRequest {
		return resourcev1.DeviceRequest{Name: name, Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: class}}
	}
	result := func(request, device string) resourcev1.DeviceRequestAllocationResult {
		return resourcev1.DeviceRequestAllocationResult{Request: request, Driver: "gpu.example.com", Pool: "node-1", Device: device}
	}
	ref := func(device string) store.DeviceRef {
		return store.DeviceRef{Driver: "gpu.example.com", Pool: "node-1", Device: device}
	}
	allocated := func(results ...resourcev1.DeviceRequestAllocationResult) resourcev1.ResourceClaimStatus {
		return resourcev1.ResourceClaimStatus{Allocation: &resourcev1.AllocationResult{
			Devices: resourcev1.DeviceAllocationResult{Results: results}}}
	}
	tests := []struct {
		name          string
		requests      []resourcev1.DeviceRequest
		status        resourcev1.ResourceClaimStatus
		wantClasses   map[string]int64
		wantAllocated []store.DeviceRef
		wantIssues    int
	}{
		{name: "unallocated: every class named, no devices", requests: []resourcev1.DeviceRequest{exactly("gpu", "gpu.example.com"), exactly("nic", "nic.example.com")},
			wantClasses: map[string]int64{"gpu.example.com": 0, "nic.example.com": 0}},
		{name: "allocated: devices counted per class", requests: []resourcev1.DeviceRequest{exactly("gpu", "gpu.example.com"), exactly("nic", "nic.example.com")},
			status:      allocated(result("gpu", "gpu-0"), result("gpu", "gpu-1"), result("nic", "nic-0")),
			wantClasses: map[string]int64{"gpu.example.com": 2, "nic.example.com": 1}, wantAllocated: []store.DeviceRef{ref("gpu-0"), ref("gpu-1"), ref("nic-0")}},
		{name: "two requests of one class add up", requests: []resourcev1.DeviceRequest{exactly("a", "gpu.example.com"), exactly("b", "gpu.example.com")},
			status:      allocated(result("a", "gpu-0"), result("b", "gpu-1")),
			wantClasses: map[string]int64{"gpu.example.com": 2}, wantAllocated: []store.DeviceRef{ref("gpu-0"), ref("gpu-1")}},
		{name: "firstAvailable names every subrequest's class, counts the chosen one",
			requests: []resourcev1.DeviceRequest{{Name: "gpu", FirstAvailable: []resourcev1.DeviceSubRequest{
				{Name: "large", DeviceClassName: "large.gpu.example.com"}, {Name: "small", DeviceClassName: "small.gpu.example.com"}}}},
			status:      allocated(result("gpu/small", "gpu-3")),
			wantClasses: map[string]int64{"large.gpu.example.com": 0, "small.gpu.example.com": 1}, wantAllocated: []store.DeviceRef{ref("gpu-3")}},
		{name: "adminAccess results do not take the device", requests: []resourcev1.DeviceRequest{exactly("gpu", "gpu.example.com")},
			status: func() resourcev1.ResourceClaimStatus {
				admin := result("gpu", "gpu-1")
				admin.AdminAccess = new(true)
				notAdmin := result("gpu", "gpu-0")
				notAdmin.AdminAccess = new(false)
				return allocated(notAdmin, admin)
			}(),
			wantClasses: map[string]int64{"gpu.example.com": 1}, wantAllocated: []store.DeviceRef{ref("gpu-0")}},
		{name: "a result of an unknown request is allocated for no class, reported", requests: []resourcev1.DeviceRequest{exactly("gpu", "gpu.example.com")},
			status:      allocated(result("gone", "gpu-0")),
			wantClasses: map[string]int64{"gpu.example.com": 0}, wantAllocated: []store.DeviceRef{ref("gpu-0")}, wantIssues: 1},
		{name: "a firstAvailable result without its subrequest matches nothing, reported",
			requests: []resourcev1.DeviceRequest{{Name: "gpu", FirstAvailable: []resourcev1.DeviceSubRequest{{Name: "any", DeviceClassName: "gpu.example.com"}}}},
			status:   allocated(result("gpu", "gpu-0")), wantClasses: map[string]int64{"gpu.example.com": 0}, wantAllocated: []store.DeviceRef{ref("gpu-0")}, wantIssues: 1},
		{name: "a request of a kind this version does not know is left out, reported",
			requests:    []resourcev1.DeviceRequest{{Name: "future"}, exactly("gpu", "gpu.example.com")},
			wantClasses: map[string]int64{"gpu.example.com": 0}, wantIssues: 1},
		{name: "a request without a class is left out, reported", requests: []resourcev1.DeviceRequest{exactly("gpu", "")}, wantIssues: 1},
		{name: "no requests"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := &resourcev1.ResourceClaim{
				ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "train", UID: "c1"},
				Spec:       resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: tc.requests}},
				Status:     tc.status,
			}
			got, issues := convertResourceClaim(c)
			want := store.ResourceClaim{Namespace: "team-a", Name: "train", UID: "c1", Classes: tc.wantClasses, Allocated: tc.wantAllocated}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("got  %+v\nwant %+v", got, want)
			}
			if len(issues) != tc.wantIssues {
				t.Errorf("issues = %v, want %d", issues, tc.wantIssues)
			}
		})
	}
}
