package discovery

import (
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
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
				Capacity:    store.Resources{CPUMillis: 4000, MemoryBytes: 16 << 30, Pods: 110},
				Allocatable: store.Resources{CPUMillis: 3920, MemoryBytes: 15 << 30, Pods: 110},
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
