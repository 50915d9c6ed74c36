package clusternamespace

import (
	"math"

	"github.com/google/uuid"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/example/platform-apiserver/pkg/apis/platform"
	"github.com/example/platform-apiserver/pkg/registry"
	"github.com/example/platform-apiserver/pkg/registry/store"
)

// uidSpace namespaces the name-based UUIDs of ClusterNamespace objects.
var uidSpace = uuid.MustParse("9b7f3c2e-1d4a-4c8e-b6f1-2e5d8a9c0f47")

// ToObject builds the API object from a registry record.
func ToObject(cn *store.ClusterNamespace) platform.ClusterNamespace {
	ns := &cn.Namespace
	obj := platform.ClusterNamespace{
		ObjectMeta: registry.ViewMeta{
			Namespace: ns.Name, Name: cn.ClusterID,
			UIDSpace: uidSpace, UIDKey: cn.ClusterID + "/" + ns.Name + "/" + ns.UID,
			Labels: ns.Labels, ClusterID: cn.ClusterID,
			CreatedAt: ns.CreatedAt, FirstSeen: cn.FirstSeen, ResourceVersion: cn.ResourceVersion,
		}.ObjectMeta(),
		Status: platform.ClusterNamespaceStatus{
			Cluster:           cn.ClusterID,
			Phase:             platform.NamespacePhase(ns.Phase),
			UID:               types.UID(ns.UID),
			CreationTimestamp: metav1.NewTime(ns.CreatedAt),
			PodCount:          cn.PodCount,
			Requests: platform.ComputeResources{
				CPU:    *resource.NewMilliQuantity(cn.Requested.CPUMillis, resource.DecimalSI),
				Memory: *resource.NewQuantity(cn.Requested.MemoryBytes, resource.BinarySI),
				Other:  registry.OtherQuantities(cn.Requested.Other),
			},
			DeviceClaims: registry.DeviceClaims(cn.DeviceClaims),
		},
	}
	if u := cn.Usage; u != nil {
		obj.Status.Usage = &platform.NamespaceUsage{
			ComputeResources: platform.ComputeResources{
				CPU:    *resource.NewScaledQuantity(u.CPUNanoCores, resource.Nano),
				Memory: *resource.NewQuantity(u.MemoryBytes, resource.BinarySI),
			},
			Pods:             u.Pods,
			Timestamp:        metav1.NewTime(u.Timestamp),
			CPUOfRequests:    percentOf(u.CPUNanoCores, cn.Requested.CPUMillis*1_000_000),
			MemoryOfRequests: percentOf(u.MemoryBytes, cn.Requested.MemoryBytes),
		}
	}
	for _, q := range cn.Quotas {
		obj.Status.Quotas = append(obj.Status.Quotas, platform.ResourceQuotaStatus{
			Name: q.Name, Hard: quantities(q.Hard), Used: quantities(q.Used), Scopes: q.Scopes,
		})
	}
	return obj
}

// quantities parses the canonical quantity strings the registry keeps;
// discovery stores only strings that parsed, so a failure here means the row
// was written by something else and the entry is skipped.
func quantities(in map[string]string) map[string]resource.Quantity {
	if len(in) == 0 {
		return nil
	}
	out := make(map[string]resource.Quantity, len(in))
	for k, v := range in {
		if q, err := resource.ParseQuantity(v); err == nil {
			out[k] = q
		}
	}
	return out
}

// percentOf is used as a rounded percentage of requested, nil without a request.
func percentOf(used, requested int64) *int64 {
	if requested <= 0 {
		return nil
	}
	p := int64(math.Round(100 * float64(used) / float64(requested)))
	return &p
}
