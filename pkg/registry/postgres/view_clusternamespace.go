package postgres

import (
	"context"
	"time"

	"github.com/example/platform-apiserver/pkg/registry/store"
)

// clusterNamespaceView is cluster_namespace: one row per member namespace.
// Its objects live in the member namespace and are named after the
// cluster, so lists order by (name, cluster_id).
var clusterNamespaceView = newView(view[store.ClusterNamespace]{
	kind: store.KindClusterNamespace, resource: "clusternamespaces", table: "cluster_namespace",
	order:      [2]string{"name", "cluster_id"},
	aggregates: []string{"pod_count", "cpu_request_millis", "memory_request_bytes", "requested_other", "quotas", "device_claims"},
	key:        func(n *store.ClusterNamespace) store.ListKey { return store.ListKey{n.Namespace.Name, n.ClusterID} },
	name: func(namespace, name string) (store.ListKey, bool) {
		return store.ListKey{namespace, name}, namespace != "" && name != ""
	},
	columns: []column[store.ClusterNamespace]{
		col("cluster_id", func(n *store.ClusterNamespace) *string { return &n.ClusterID }),
		field("name", "text", func(n *store.ClusterNamespace) *string { return &n.Namespace.Name }),
		field("uid", "text", func(n *store.ClusterNamespace) *string { return &n.Namespace.UID }),
		jsonField("labels", func(n *store.ClusterNamespace) *map[string]string { return &n.Namespace.Labels }, "{}"),
		field("phase", "text", func(n *store.ClusterNamespace) *string { return &n.Namespace.Phase }),
		{name: "created_at", sqlType: "timestamptz", target: func(n *store.ClusterNamespace) any { return nullable(&n.Namespace.CreatedAt) },
			value: func(n *store.ClusterNamespace) any { return timeOrNil(n.Namespace.CreatedAt) }},
		col("pod_count", func(n *store.ClusterNamespace) *int64 { return &n.PodCount }),
		col("cpu_request_millis", func(n *store.ClusterNamespace) *int64 { return &n.Requested.CPUMillis }),
		col("memory_request_bytes", func(n *store.ClusterNamespace) *int64 { return &n.Requested.MemoryBytes }),
		otherCol("requested_other", func(n *store.ClusterNamespace) *map[string]int64 { return &n.Requested.Other }),
		col("quotas", func(n *store.ClusterNamespace) *[]store.Quota { return &n.Quotas }),
		col("device_claims", func(n *store.ClusterNamespace) *map[string]store.ClaimCount { return &n.DeviceClaims }),
		col("first_seen", func(n *store.ClusterNamespace) *time.Time { return &n.FirstSeen }),
		col("resource_version", func(n *store.ClusterNamespace) *int64 { return &n.ResourceVersion }),
		{name: "usage_cpu_nanocores", target: func(n *store.ClusterNamespace) any { return nullable(&namespaceUsage(n).CPUNanoCores) }},
		{name: "usage_memory_bytes", target: func(n *store.ClusterNamespace) any { return nullable(&namespaceUsage(n).MemoryBytes) }},
		{name: "usage_pods", target: func(n *store.ClusterNamespace) any { return nullable(&namespaceUsage(n).Pods) }},
		{name: "usage_observed_at", target: func(n *store.ClusterNamespace) any { return nullable(&namespaceUsage(n).Timestamp) }},
	},
	finish: func(n *store.ClusterNamespace) {
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

// ClusterNamespaces serves ClusterNamespace records by namespace and
// object name (the cluster id).
func (s *Store) ClusterNamespaces() store.Source[store.ClusterNamespace] {
	return clusterNamespaceView.source(s)
}

// GetClusterNamespace returns the view of namespace in cluster clusterID.
func (s *Store) GetClusterNamespace(ctx context.Context, namespace, clusterID string) (*store.ClusterNamespace, error) {
	return clusterNamespaceView.get(ctx, s, store.ListKey{namespace, clusterID})
}
