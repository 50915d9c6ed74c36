package nodecapacity

import (
	"github.com/google/uuid"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/example/platform-apiserver/pkg/apis/platform"
	"github.com/example/platform-apiserver/pkg/registry"
	"github.com/example/platform-apiserver/pkg/registry/store"
)

// uidSpace namespaces the name-based UUIDs of NodeCapacity objects.
var uidSpace = uuid.MustParse("3f0c7e58-8f5e-4a53-9d55-7a8a2f0b6c11")

// ToObject builds the API object from a registry record.
func ToObject(nc *store.NodeCapacity) platform.NodeCapacity {
	n := &nc.Node
	obj := platform.NodeCapacity{
		ObjectMeta: registry.ViewMeta{
			Name:     Name(nc.ClusterID, n.Name),
			UIDSpace: uidSpace, UIDKey: nc.ClusterID + "/" + n.Name + "/" + n.UID,
			Labels: n.Labels, ClusterID: nc.ClusterID,
			CreatedAt: n.CreatedAt, FirstSeen: nc.FirstSeen, ResourceVersion: nc.ResourceVersion,
		}.ObjectMeta(),
		Status: platform.NodeCapacityStatus{
			Cluster:             nc.ClusterID,
			NodeName:            n.Name,
			Capacity:            registry.Resources(n.Capacity),
			Allocatable:         registry.Resources(n.Allocatable),
			Requested:           registry.Resources(nc.Requested),
			Available:           registry.Resources(registry.Available(n.Allocatable, nc.Requested)),
			Schedulable:         nc.Schedulable,
			UnschedulableReason: platform.UnschedulableReason(nc.UnschedulableReason),
			Unschedulable:       n.Unschedulable,
			Ready:               n.Ready,
			Devices:             registry.Devices(nc.Devices),
		},
	}
	if u := nc.Usage; u != nil {
		obj.Status.Usage = &platform.NodeUsage{
			CPU:       *resource.NewScaledQuantity(u.CPUNanoCores, resource.Nano),
			Memory:    *resource.NewQuantity(u.MemoryBytes, resource.BinarySI),
			Timestamp: metav1.NewTime(u.Timestamp),
			Window:    metav1.Duration{Duration: u.Window},
		}
		// Print usage in the units people read (millicores), not nanocores.
		obj.Status.Usage.CPU.SetMilli(obj.Status.Usage.CPU.MilliValue())
	}
	for _, c := range n.Conditions {
		obj.Status.Conditions = append(obj.Status.Conditions, platform.NodeCondition{
			Type: c.Type, Status: c.Status, Reason: c.Reason, Message: c.Message,
			LastTransitionTime: metav1.NewTime(c.LastTransitionTime),
		})
	}
	for _, t := range n.Taints {
		obj.Status.Taints = append(obj.Status.Taints, platform.Taint{Key: t.Key, Value: t.Value, Effect: t.Effect})
	}
	return obj
}
