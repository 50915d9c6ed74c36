package discovery

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/example/platform-apiserver/pkg/registry/store"
)

// convertNode records a member node: capacity, allocatable, conditions,
// taints and the cordon flag, from which the registry derives schedulable.
func convertNode(n *corev1.Node) (store.Node, []issue) {
	var q quantities
	rec := store.Node{
		Name:          n.Name,
		UID:           string(n.UID),
		Labels:        n.Labels,
		CreatedAt:     n.CreationTimestamp.Time,
		Capacity:      nodeResources(&q, "status.capacity", n.Status.Capacity),
		Allocatable:   nodeResources(&q, "status.allocatable", n.Status.Allocatable),
		Unschedulable: n.Spec.Unschedulable,
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
			rec.Ready = true
		}
		field := "status.conditions[" + string(c.Type) + "]"
		rec.Conditions = append(rec.Conditions, store.NodeCondition{
			Type:               string(c.Type),
			Status:             string(c.Status),
			Reason:             q.text(field+".reason", c.Reason),
			Message:            q.text(field+".message", c.Message),
			LastTransitionTime: c.LastTransitionTime.Time,
		})
	}
	for _, t := range n.Spec.Taints {
		switch t.Effect {
		case corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
		default:
			q.issues = append(q.issues, issue{Field: "spec.taints[" + t.Key + "].effect", Value: string(t.Effect), Reason: "unknown taint effect, kept as is"})
		}
		rec.Taints = append(rec.Taints, store.Taint{Key: t.Key, Value: t.Value, Effect: string(t.Effect)})
	}
	return rec, q.issues
}

func nodeResources(q *quantities, field string, list corev1.ResourceList) store.Quantities {
	return store.Quantities{
		CPUMillis:   q.milli(field, list, corev1.ResourceCPU),
		MemoryBytes: q.value(field, list, corev1.ResourceMemory),
		Pods:        q.value(field, list, corev1.ResourcePods),
		Other:       q.others(field, list, corev1.ResourcePods),
	}
}
