package views

import (
	"time"

	"github.com/example/platform-apiserver/pkg/registry/store"
)

// ClusterNamespace is cluster_namespace: one row per member namespace.
// Its objects live in the member namespace and are named after the
// cluster, so lists order by (name, cluster_id).
var ClusterNamespace = Declare(View[store.ClusterNamespace]{
	Kind: store.KindClusterNamespace, Resource: "clusternamespaces", Table: "cluster_namespace",
	Order:      [2]string{"name", "cluster_id"},
	Aggregates: []string{"pod_count", "cpu_request_millis", "memory_request_bytes", "requested_other", "quotas", "device_claims"},
	Key:        func(n *store.ClusterNamespace) store.ListKey { return store.ListKey{n.Namespace.Name, n.ClusterID} },
	Name: func(namespace, name string) (store.ListKey, bool) {
		return store.ListKey{namespace, name}, namespace != "" && name != ""
	},
	Columns: []Column[store.ClusterNamespace]{
		Col("cluster_id", func(n *store.ClusterNamespace) *string { return &n.ClusterID }),
		Field("name", "text", func(n *store.ClusterNamespace) *string { return &n.Namespace.Name }),
		Field("uid", "text", func(n *store.ClusterNamespace) *string { return &n.Namespace.UID }),
		JSONField("labels", func(n *store.ClusterNamespace) *map[string]string { return &n.Namespace.Labels }, "{}"),
		Field("phase", "text", func(n *store.ClusterNamespace) *string { return &n.Namespace.Phase }),
		{name: "created_at", sqlType: "timestamptz", target: func(n *store.ClusterNamespace) any { return nullable(&n.Namespace.CreatedAt) },
			value: func(n *store.ClusterNamespace) any { return timeOrNil(n.Namespace.CreatedAt) }},
		Col("pod_count", func(n *store.ClusterNamespace) *int64 { return &n.PodCount }),
		Col("cpu_request_millis", func(n *store.ClusterNamespace) *int64 { return &n.Requested.CPUMillis }),
		Col("memory_request_bytes", func(n *store.ClusterNamespace) *int64 { return &n.Requested.MemoryBytes }),
		otherCol("requested_other", func(n *store.ClusterNamespace) *map[string]int64 { return &n.Requested.Other }),
		Col("quotas", func(n *store.ClusterNamespace) *[]store.Quota { return &n.Quotas }),
		Col("device_claims", func(n *store.ClusterNamespace) *map[string]store.ClaimCount { return &n.DeviceClaims }),
		Col("first_seen", func(n *store.ClusterNamespace) *time.Time { return &n.FirstSeen }),
		Col("resource_version", func(n *store.ClusterNamespace) *int64 { return &n.ResourceVersion }),
		{name: "usage_cpu_nanocores", target: func(n *store.ClusterNamespace) any { return nullable(&namespaceUsage(n).CPUNanoCores) }},
		{name: "usage_memory_bytes", target: func(n *store.ClusterNamespace) any { return nullable(&namespaceUsage(n).MemoryBytes) }},
		{name: "usage_pods", target: func(n *store.ClusterNamespace) any { return nullable(&namespaceUsage(n).Pods) }},
		{name: "usage_observed_at", target: func(n *store.ClusterNamespace) any { return nullable(&namespaceUsage(n).Timestamp) }},
	},
	Finish: func(n *store.ClusterNamespace) {
		if n.Usage.Timestamp.IsZero() {
			n.Usage = nil // never scraped, or expired
		}
		n.Requested.Pods = n.PodCount
		if len(n.DeviceClaims) == 0 {
			n.DeviceClaims = nil // '{}'
		}
		for i := range n.Quotas {
			n.Quotas[i].Namespace = n.Namespace.Name
		}
	},
})

// namespaceUsage is the usage a scan fills in, made on first use.
func namespaceUsage(n *store.ClusterNamespace) *store.NamespaceUsage {
	if n.Usage == nil {
		n.Usage = &store.NamespaceUsage{}
	}
	return n.Usage
}
