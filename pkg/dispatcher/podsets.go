package dispatcher

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	resourcehelper "k8s.io/component-helpers/resource"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	platform "github.com/example/platform-apiserver/pkg/apis/platform/v1alpha1"
)

// PodSet is one pod set of a Workload as a PlacementReport asks it: one
// replica's requirements and how many replicas.
type PodSet struct {
	Name  string
	Count int64
	// Spec has every field of the question but Clusters.
	Spec platform.PlacementReportSpec
}

// DevicePrefix names a driver's DRA devices among resources: a member's
// free devices and a pod set's demand of them, as device/<driver>.
const DevicePrefix = "device/"

// PerReplica is what one replica takes from a member: its requests, one
// pod, and its devices per driver (DevicePrefix).
func (p PodSet) PerReplica() corev1.ResourceList {
	out := corev1.ResourceList{corev1.ResourcePods: *resource.NewQuantity(1, resource.DecimalSI)}
	for name, q := range p.Spec.Requests {
		out[corev1.ResourceName(name)] = q.DeepCopy()
	}
	for _, d := range p.Spec.Devices {
		out[corev1.ResourceName(DevicePrefix+d.Driver)] = *resource.NewQuantity(d.Count, resource.DecimalSI)
	}
	return out
}

// Demand is what the pod set takes from a member in all: PerReplica times
// the count.
func (p PodSet) Demand() corev1.ResourceList {
	out := p.PerReplica()
	for name, q := range out {
		q.Mul(p.Count)
		out[name] = q
	}
	return out
}

// Unmodelled says why a pod set cannot be asked as a PlacementReport: the
// answer would not be the scheduler's.
type Unmodelled struct {
	PodSet string
	Reason string
}

func (u *Unmodelled) Error() string {
	return fmt.Sprintf("pod set %q %s, which PlacementReport does not model", u.PodSet, u.Reason)
}

// PodSetsOf turns a Workload's pod sets into PlacementReport questions: the
// pod template's requests (as kube-scheduler sums them: containers, the
// largest init container, overhead), node selector, required node affinity,
// tolerations, one DoNotSchedule topology spread over the pod set's own
// pods, and the DRA devices of its resource claims (through devices; nil
// leaves claims unmodelled). The count is the admitted one where Kueue
// admitted fewer (partial admission). A pod set asking what
// PlacementReport does not model (pod affinity, host ports, several spread
// constraints, a topology request, claims devices cannot count) is an
// *Unmodelled error; an error reading the claims is returned as is.
func PodSetsOf(ctx context.Context, wl *kueue.Workload, devices DeviceResolver) ([]PodSet, error) {
	admitted := map[kueue.PodSetReference]int32{}
	if wl.Status.Admission != nil {
		for _, a := range wl.Status.Admission.PodSetAssignments {
			if a.Count != nil {
				admitted[a.Name] = *a.Count
			}
		}
	}
	out := make([]PodSet, 0, len(wl.Spec.PodSets))
	for _, ps := range wl.Spec.PodSets {
		count := ps.Count
		if n, ok := admitted[ps.Name]; ok {
			count = n
		}
		spec, err := question(string(ps.Name), &ps)
		if err != nil {
			return nil, err
		}
		if claims := ps.Template.Spec.ResourceClaims; len(claims) > 0 {
			if devices == nil {
				return nil, &Unmodelled{PodSet: string(ps.Name), Reason: "claims DRA devices through resource claims"}
			}
			if spec.Devices, err = devices.Devices(ctx, wl.Namespace, string(ps.Name), claims); err != nil {
				return nil, err
			}
		}
		spec.Replicas = int64(count)
		out = append(out, PodSet{Name: string(ps.Name), Count: int64(count), Spec: spec})
	}
	return out, nil
}

func question(name string, ps *kueue.PodSet) (platform.PlacementReportSpec, error) {
	pod := &corev1.Pod{ObjectMeta: ps.Template.ObjectMeta, Spec: ps.Template.Spec}
	unmodelled := func(reason string) error { return &Unmodelled{PodSet: name, Reason: reason} }
	switch {
	case asksTopology(ps.TopologyRequest):
		return platform.PlacementReportSpec{}, unmodelled("has a topology request (topology-aware scheduling)")
	case pod.Spec.NodeName != "":
		return platform.PlacementReportSpec{}, unmodelled("names a node (spec.nodeName)")
	case hasRequiredPodAffinity(pod.Spec.Affinity):
		return platform.PlacementReportSpec{}, unmodelled("has required pod affinity or anti-affinity")
	case hasHostPort(&pod.Spec):
		return platform.PlacementReportSpec{}, unmodelled("asks host ports")
	}
	spec := platform.PlacementReportSpec{Requests: map[string]resource.Quantity{}}
	for r, q := range resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{}) {
		if !q.IsZero() {
			spec.Requests[string(r)] = q
		}
	}
	if len(spec.Requests) == 0 {
		spec.Requests = nil
	}
	spec.NodeSelector = pod.Spec.NodeSelector
	if a := pod.Spec.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		for _, t := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
			spec.NodeAffinity = append(spec.NodeAffinity, platform.NodeSelectorTerm{
				MatchExpressions: requirements(t.MatchExpressions),
				MatchFields:      requirements(t.MatchFields),
			})
		}
	}
	for _, t := range pod.Spec.Tolerations {
		spec.Tolerations = append(spec.Tolerations, platform.Toleration{
			Key: t.Key, Operator: string(t.Operator), Value: t.Value, Effect: string(t.Effect),
		})
	}
	spread, err := topologySpread(pod)
	if err != nil {
		return platform.PlacementReportSpec{}, unmodelled(err.Error())
	}
	spec.TopologySpread = spread
	return spec, nil
}

func requirements(in []corev1.NodeSelectorRequirement) []platform.NodeSelectorRequirement {
	var out []platform.NodeSelectorRequirement
	for _, r := range in {
		out = append(out, platform.NodeSelectorRequirement{Key: r.Key, Operator: string(r.Operator), Values: r.Values})
	}
	return out
}

// topologySpread is the pod's one DoNotSchedule constraint, when it
// spreads the pod set's own pods (its selector matches the template's
// labels); ScheduleAnyway constraints only score, as preferences do.
func topologySpread(pod *corev1.Pod) (*platform.TopologySpread, error) {
	var hard []corev1.TopologySpreadConstraint
	for _, c := range pod.Spec.TopologySpreadConstraints {
		if c.WhenUnsatisfiable == corev1.DoNotSchedule {
			hard = append(hard, c)
		}
	}
	switch len(hard) {
	case 0:
		return nil, nil
	case 1:
	default:
		return nil, fmt.Errorf("has %d DoNotSchedule topology spread constraints (one is modelled)", len(hard))
	}
	c := hard[0]
	sel, err := metav1.LabelSelectorAsSelector(c.LabelSelector)
	if err != nil || c.LabelSelector == nil || !sel.Matches(labels.Set(pod.Labels)) {
		return nil, fmt.Errorf("spreads over pods other than its own (topology spread selector %s)", metav1.FormatLabelSelector(c.LabelSelector))
	}
	if c.MinDomains != nil || len(c.MatchLabelKeys) > 0 {
		return nil, fmt.Errorf("sets minDomains or matchLabelKeys on its topology spread")
	}
	return &platform.TopologySpread{TopologyKey: c.TopologyKey, MaxSkew: c.MaxSkew}, nil
}

// asksTopology says the pod set asks topology-aware scheduling: a level
// required or preferred, or unconstrained. Kueue fills the request's
// pod index labels for every Job, which ask nothing of placement.
func asksTopology(r *kueue.PodSetTopologyRequest) bool {
	return r != nil && (r.Required != nil || r.Preferred != nil || r.Unconstrained != nil)
}

func hasRequiredPodAffinity(a *corev1.Affinity) bool {
	if a == nil {
		return false
	}
	return (a.PodAffinity != nil && len(a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution) > 0) ||
		(a.PodAntiAffinity != nil && len(a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution) > 0)
}

func hasHostPort(spec *corev1.PodSpec) bool {
	for _, cs := range [][]corev1.Container{spec.InitContainers, spec.Containers} {
		for _, c := range cs {
			for _, p := range c.Ports {
				if p.HostPort != 0 {
					return true
				}
			}
		}
	}
	return false
}
