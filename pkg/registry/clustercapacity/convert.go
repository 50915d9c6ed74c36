package clustercapacity

import (
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/example/platform-apiserver/pkg/apis/platform"
	"github.com/example/platform-apiserver/pkg/registry"
	"github.com/example/platform-apiserver/pkg/registry/store"
)

// uidSpace namespaces the name-based UUIDs of ClusterCapacity objects.
var uidSpace = uuid.MustParse("9b51f1d4-3c8e-4e0a-8f6a-2d7c4b1e5a90")

// ToObject builds the API object from a registry record.
func ToObject(cc *store.ClusterCapacity) platform.ClusterCapacity {
	obj := platform.ClusterCapacity{
		ObjectMeta: registry.ViewMeta{
			Name: cc.ClusterID, UIDSpace: uidSpace, UIDKey: cc.ClusterID,
			Labels: cc.Labels, ClusterID: cc.ClusterID,
			FirstSeen: cc.FirstSeen, ResourceVersion: cc.ResourceVersion,
		}.ObjectMeta(),
		Status: platform.ClusterCapacityStatus{
			Cluster: cc.ClusterID,
			Nodes: platform.NodeCounts{Total: cc.Nodes, Ready: cc.NodesReady, Schedulable: cc.NodesSchedulable,
				Cordoned: cc.NodesCordoned, Tainted: cc.NodesTainted, WithResource: cc.NodesWith},
			Schedulable: summary(cc.Schedulable),
			All:         summary(cc.All),
			Pods:        cc.Pods,
			Namespaces:  cc.Namespaces,
			Devices:     registry.MemberDevices(cc.Devices),
			Committed:   committed(cc.Committed, cc.Schedulable.Allocatable),
		},
	}
	if f := cc.MaxFree; f != nil {
		obj.Status.LargestFree = &platform.ComputeResources{
			CPU:    *resource.NewMilliQuantity(f.CPUMillis, resource.DecimalSI),
			Memory: *resource.NewQuantity(f.MemoryBytes, resource.BinarySI),
			Other:  registry.OtherQuantities(f.Other),
		}
	}
	if cc.Mirroring != "" {
		obj.Status.Mirroring = platform.MemberMirroring{State: platform.MirroringState(cc.Mirroring), Since: new(metav1.NewTime(cc.MirroringSince))}
	}
	if !cc.LastChange.IsZero() {
		obj.Status.Mirroring.LastChangeTime = new(metav1.NewTime(cc.LastChange))
	}
	if !cc.LastUsage.IsZero() {
		obj.Status.Mirroring.LastUsageTime = new(metav1.NewTime(cc.LastUsage))
	}
	if !cc.CompleteAsOf.IsZero() {
		obj.Status.Mirroring.CompleteAsOf = new(metav1.NewTime(cc.CompleteAsOf))
	}
	meta.SetStatusCondition(&obj.Status.Conditions, syncedCondition(cc))
	meta.SetStatusCondition(&obj.Status.Conditions, roomCondition(cc))
	return obj
}

// Judged returns the conversion a reader makes: ToObject, then the
// member's mirroring judged by f at read time. A member whose mirror
// heartbeat is older than f.StaleAfter shows state Stale since the
// heartbeat went past the bound, with its data age, and condition
// Synced=False (reason Stale) naming the state discovery last recorded:
// a writer that cannot write cannot record that it is failing.
func Judged(f registry.MemberStaleness) func(cc *store.ClusterCapacity) platform.ClusterCapacity {
	return func(cc *store.ClusterCapacity) platform.ClusterCapacity {
		obj := ToObject(cc)
		age, stale := f.Age(cc.CompleteAsOf)
		if !stale {
			return obj
		}
		m := &obj.Status.Mirroring
		recorded := m.State
		since := metav1.NewTime(cc.CompleteAsOf.Add(f.StaleAfter))
		m.State, m.Since, m.DataAge = platform.MirroringStale, &since, &metav1.Duration{Duration: age}
		meta.SetStatusCondition(&obj.Status.Conditions, metav1.Condition{
			Type: platform.ClusterCapacitySynced, Status: metav1.ConditionFalse, Reason: string(platform.MirroringStale),
			LastTransitionTime: since,
			Message: fmt.Sprintf("Nothing has vouched for the member's data for %s (complete as of %s), past the server's --member-stale-after %s; "+
				"discovery last recorded the member %s", age, cc.CompleteAsOf.UTC().Format(time.RFC3339), f.StaleAfter, recordedState(recorded)),
		})
		return obj
	}
}

// recordedState names a recorded mirroring state for a message.
func recordedState(s platform.MirroringState) string {
	if s == "" {
		return "in no state"
	}
	return string(s)
}

// syncedCondition is Synced: the member's mirroring state, since it began.
func syncedCondition(cc *store.ClusterCapacity) metav1.Condition {
	c := metav1.Condition{Type: platform.ClusterCapacitySynced, LastTransitionTime: metav1.NewTime(cc.MirroringSince)}
	switch cc.Mirroring {
	case "":
		c.Status, c.Reason, c.LastTransitionTime = metav1.ConditionUnknown, platform.ReasonNotReported, metav1.NewTime(cc.FirstSeen)
		c.Message = "Discovery has not reported the member's mirroring state"
	case store.MemberSynced:
		c.Status, c.Reason = metav1.ConditionTrue, string(cc.Mirroring)
		c.Message = "Every resource of the member is listed and watched, and its changes commit"
	default:
		c.Status, c.Reason = metav1.ConditionFalse, string(cc.Mirroring)
		c.Message = "The member's mirroring is " + string(cc.Mirroring)
	}
	return c
}

// roomCondition is HasSchedulableCapacity, with the time the registry saw it
// change.
func roomCondition(cc *store.ClusterCapacity) metav1.Condition {
	c := metav1.Condition{Type: platform.ClusterCapacityHasRoom, LastTransitionTime: metav1.NewTime(cc.HasRoomSince)}
	switch {
	case cc.HasRoom:
		c.Status, c.Reason = metav1.ConditionTrue, platform.ReasonRoomLeft
		c.Message = "A schedulable node has CPU and memory left"
	case cc.NodesSchedulable == 0:
		c.Status, c.Reason = metav1.ConditionFalse, platform.ReasonNoSchedulableNode
		c.Message = "The member has no schedulable node"
	default:
		c.Status, c.Reason = metav1.ConditionFalse, platform.ReasonSchedulableFull
		c.Message = "Every schedulable node has no CPU or no memory left"
	}
	return c
}

// hasRoom reads the object's HasSchedulableCapacity condition.
func hasRoom(o *platform.ClusterCapacity) bool {
	return meta.IsStatusConditionTrue(o.Status.Conditions, platform.ClusterCapacityHasRoom)
}

func summary(s store.CapacitySums) platform.CapacitySummary {
	out := platform.CapacitySummary{
		Allocatable: registry.Resources(s.Allocatable),
		Requested:   registry.Resources(s.Requested),
		Available:   registry.Resources(registry.Available(s.Allocatable, s.Requested)),
	}
	if s.UsageNodes > 0 {
		out.Usage = &platform.CapacityUsage{
			CPU:    *resource.NewScaledQuantity(s.UsageCPUNanoCores, resource.Nano),
			Memory: *resource.NewQuantity(s.UsageMemoryBytes, resource.BinarySI),
			Nodes:  s.UsageNodes,
		}
		// Print usage in the units people read (millicores), not nanocores.
		out.Usage.CPU.SetMilli(out.Usage.CPU.MilliValue())
	}
	return out
}

// committed is the API form of the member's committed quota, with each
// Hard in percent of the schedulable allocatable it limits; nil when the
// member's quotas limit nothing on pods.
func committed(c store.QuotaCommitment, allocatable store.Quantities) *platform.QuotaCommitment {
	if len(c.Hard)+len(c.Used)+len(c.ScopedHard)+len(c.ScopedUsed) == 0 {
		return nil
	}
	out := &platform.QuotaCommitment{
		Hard: decimalQuantities(c.Hard), Used: decimalQuantities(c.Used),
		ScopedHard: decimalQuantities(c.ScopedHard), ScopedUsed: decimalQuantities(c.ScopedUsed),
	}
	for name, text := range c.Hard {
		hard, ok := amount(name, text)
		alloc, known := NodeAmount(name, allocatable)
		if !ok || !known || alloc.Sign() <= 0 {
			continue
		}
		if out.PercentOfAllocatable == nil {
			out.PercentOfAllocatable = map[string]int64{}
		}
		out.PercentOfAllocatable[name] = Percent(hard, alloc, false)
	}
	return out
}

// LimitedResource is the node resource a quota's resource name limits:
// requests.<r> and limits.<r> limit <r>, pods limits pods; "" for any
// other name.
func LimitedResource(quotaResource string) string {
	if quotaResource == "pods" {
		return "pods"
	}
	for _, prefix := range []string{"requests.", "limits."} {
		if r, ok := strings.CutPrefix(quotaResource, prefix); ok {
			return r
		}
	}
	return ""
}

// decimalQuantities parses the registry's decimal amounts in base units
// into quantities (Amount); an amount that does not parse is left out.
func decimalQuantities(in map[string]string) map[string]resource.Quantity {
	if len(in) == 0 {
		return nil
	}
	out := make(map[string]resource.Quantity, len(in))
	for name, v := range in {
		if q, ok := amount(name, v); ok {
			out[name] = q
		}
	}
	return out
}
