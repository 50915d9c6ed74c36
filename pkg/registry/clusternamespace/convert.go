package clusternamespace

import (
	"strconv"

	"github.com/google/uuid"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/example/platform-apiserver/pkg/apis/platform"
	"github.com/example/platform-apiserver/pkg/registry/store"
)

// uidSpace namespaces the name-based UUIDs of ClusterNamespace objects.
var uidSpace = uuid.MustParse("9b7f3c2e-1d4a-4c8e-b6f1-2e5d8a9c0f47")

// ToObject builds the API object from a registry record.
func ToObject(cn *store.ClusterNamespace) platform.ClusterNamespace {
	ns := &cn.Namespace
	labels := make(map[string]string, len(ns.Labels)+1)
	for k, v := range ns.Labels {
		labels[k] = v
	}
	labels[platform.ClusterLabel] = cn.ClusterID

	created := ns.CreatedAt
	if created.IsZero() {
		created = cn.FirstSeen
	}
	obj := platform.ClusterNamespace{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:         ns.Name,
			Name:              cn.ClusterID,
			UID:               types.UID(uuid.NewSHA1(uidSpace, []byte(cn.ClusterID+"/"+ns.Name+"/"+ns.UID)).String()),
			ResourceVersion:   strconv.FormatInt(cn.ResourceVersion, 10),
			CreationTimestamp: metav1.NewTime(created),
			Labels:            labels,
		},
		Status: platform.ClusterNamespaceStatus{
			Cluster:           cn.ClusterID,
			Phase:             platform.NamespacePhase(ns.Phase),
			UID:               types.UID(ns.UID),
			CreationTimestamp: metav1.NewTime(ns.CreatedAt),
			PodCount:          cn.PodCount,
			Requests: platform.ComputeResources{
				CPU:    *resource.NewMilliQuantity(cn.Requested.CPUMillis, resource.DecimalSI),
				Memory: *resource.NewQuantity(cn.Requested.MemoryBytes, resource.BinarySI),
			},
		},
	}
	for _, q := range cn.Quotas {
		obj.Status.Quotas = append(obj.Status.Quotas, platform.ResourceQuotaStatus{
			Name: q.Name, Hard: quantities(q.Hard), Used: quantities(q.Used),
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
