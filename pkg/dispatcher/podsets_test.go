package dispatcher

import (
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

func container(cpu, mem string) corev1.Container {
	return corev1.Container{Name: "c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
		"cpu": resource.MustParse(cpu), "memory": resource.MustParse(mem)}}}
}

func workload(podSets ...kueue.PodSet) *kueue.Workload {
	return &kueue.Workload{ObjectMeta: metav1.ObjectMeta{Name: "job-a", Namespace: "team"}, Spec: kueue.WorkloadSpec{PodSets: podSets}}
}

func TestPodSetsOf(t *testing.T) {
	gpu := container("1", "1Gi")
	gpu.Resources.Requests["nvidia.com/gpu"] = resource.MustParse("2")
	main := kueue.PodSet{Name: "main", Count: 3, Template: corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "a"}},
		Spec: corev1.PodSpec{
			InitContainers: []corev1.Container{container("4", "1Gi")},
			Containers:     []corev1.Container{container("1", "2Gi"), gpu},
			NodeSelector:   map[string]string{"pool": "gpu"},
			Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
				NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "zone", Operator: "In", Values: []string{"a"}}}}}}}},
			Tolerations: []corev1.Toleration{{Key: "gpu", Operator: "Exists", Effect: "NoSchedule"}},
			TopologySpreadConstraints: []corev1.TopologySpreadConstraint{
				{MaxSkew: 1, TopologyKey: "kubernetes.io/hostname", WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "a"}}},
				{MaxSkew: 1, TopologyKey: "zone", WhenUnsatisfiable: corev1.ScheduleAnyway},
			},
		}}}
	wl := workload(main, kueue.PodSet{Name: "aux", Count: 5, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{container("500m", "0")}}}})
	wl.Status.Admission = &kueue.Admission{PodSetAssignments: []kueue.PodSetAssignment{{Name: "aux", Count: ptr.To[int32](2)}}}
	got, err := PodSetsOf(t.Context(), wl, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Fatalf("%d pod sets", len(got))
	}
	m := got[0]
	// The init container's 4 cores are more than the containers' 2.
	for r, want := range map[string]string{"cpu": "4", "memory": "3Gi", "nvidia.com/gpu": "2"} {
		if q := m.Spec.Requests[r]; q.Cmp(resource.MustParse(want)) != 0 {
			t.Errorf("requests[%s] = %s, want %s", r, q.String(), want)
		}
	}
	if m.Count != 3 || m.Spec.Replicas != 3 || m.Spec.NodeSelector["pool"] != "gpu" ||
		len(m.Spec.NodeAffinity) != 1 || m.Spec.NodeAffinity[0].MatchExpressions[0].Key != "zone" ||
		len(m.Spec.Tolerations) != 1 || m.Spec.Tolerations[0].Operator != "Exists" ||
		m.Spec.TopologySpread == nil || m.Spec.TopologySpread.TopologyKey != "kubernetes.io/hostname" {
		t.Errorf("main = %+v", m.Spec)
	}
	if a := got[1]; a.Count != 2 || a.Spec.Replicas != 2 || len(a.Spec.Requests) != 1 {
		t.Errorf("aux (partially admitted: 2 of 5) = %+v", a)
	}
	if d := m.Demand()["cpu"]; d.Cmp(resource.MustParse("12")) != 0 {
		t.Errorf("main's demand: %s cpu, want 12", d.String())
	}
}

func TestPodSetsOfUnmodelled(t *testing.T) {
	base := func(edit func(*corev1.PodSpec)) kueue.PodSet {
		ps := kueue.PodSet{Name: "main", Count: 1, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{container("1", "1Gi")}}}}
		edit(&ps.Template.Spec)
		return ps
	}
	cases := map[string]kueue.PodSet{
		"pod anti-affinity": base(func(s *corev1.PodSpec) {
			s.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{TopologyKey: "x"}}}}
		}),
		"resource claims": base(func(s *corev1.PodSpec) { s.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu"}} }),
		"host ports": base(func(s *corev1.PodSpec) {
			s.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 80, HostPort: 80}}
		}),
		"spec.nodeName": base(func(s *corev1.PodSpec) { s.NodeName = "n1" }),
		"topology spread": base(func(s *corev1.PodSpec) {
			c := corev1.TopologySpreadConstraint{MaxSkew: 1, TopologyKey: "zone", WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"other": "x"}}}
			s.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{c}
		}),
	}
	for name, ps := range cases {
		_, err := PodSetsOf(t.Context(), workload(ps), nil)
		var u *Unmodelled
		if !errors.As(err, &u) || u.PodSet != "main" || !strings.Contains(err.Error(), "does not model") {
			t.Errorf("%s: got %v, want an Unmodelled error", name, err)
		}
	}
	// Kueue sets the pod index label of every Job's pod set: no topology.
	indexed := base(func(*corev1.PodSpec) {})
	indexed.TopologyRequest = &kueue.PodSetTopologyRequest{PodIndexLabel: new("batch.kubernetes.io/job-completion-index")}
	if _, err := PodSetsOf(t.Context(), workload(indexed), nil); err != nil {
		t.Errorf("a pod index label only: %v", err)
	}
	tas := base(func(*corev1.PodSpec) {})
	tas.TopologyRequest = &kueue.PodSetTopologyRequest{Required: new("cloud.provider.com/rack")}
	if _, err := PodSetsOf(t.Context(), workload(tas), nil); err == nil || !strings.Contains(err.Error(), "topology request") {
		t.Errorf("topology request: %v", err)
	}
}
