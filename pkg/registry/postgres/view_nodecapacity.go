package postgres

import (
	"context"
	"strings"
	"time"

	"github.com/example/platform-apiserver/pkg/registry/store"
)

// nodeCapacityView is cluster_node: one row per member node, named
// <cluster id>.<node name> (a cluster id holds no dot).
var nodeCapacityView = newView(view[store.NodeCapacity]{
	kind: store.KindNodeCapacity, resource: "nodecapacities", table: "cluster_node",
	order:      [2]string{"cluster_id", "name"},
	aggregates: []string{"requested_cpu_millis", "requested_memory_bytes", "pod_count", "requested_other", "devices_total", "devices_allocated"},
	key:        func(n *store.NodeCapacity) store.ListKey { return store.ListKey{n.ClusterID, n.Node.Name} },
	name: func(_, name string) (store.ListKey, bool) {
		cluster, node, ok := strings.Cut(name, ".")
		return store.ListKey{cluster, node}, ok && cluster != "" && node != ""
	},
	columns: append([]column[store.NodeCapacity]{
		col("cluster_id", func(n *store.NodeCapacity) *string { return &n.ClusterID }),
		field("name", "text", func(n *store.NodeCapacity) *string { return &n.Node.Name }),
		field("uid", "text", func(n *store.NodeCapacity) *string { return &n.Node.UID }),
		jsonField("labels", func(n *store.NodeCapacity) *map[string]string { return &n.Node.Labels }, "{}"),
		{name: "created_at", sqlType: "timestamptz", target: func(n *store.NodeCapacity) any { return nullable(&n.Node.CreatedAt) },
			value: func(n *store.NodeCapacity) any { return timeOrNil(n.Node.CreatedAt) }},
		field("capacity_cpu_millis", "bigint", func(n *store.NodeCapacity) *int64 { return &n.Node.Capacity.CPUMillis }),
		field("capacity_memory_bytes", "bigint", func(n *store.NodeCapacity) *int64 { return &n.Node.Capacity.MemoryBytes }),
		field("capacity_pods", "bigint", func(n *store.NodeCapacity) *int64 { return &n.Node.Capacity.Pods }),
		field("allocatable_cpu_millis", "bigint", func(n *store.NodeCapacity) *int64 { return &n.Node.Allocatable.CPUMillis }),
		field("allocatable_memory_bytes", "bigint", func(n *store.NodeCapacity) *int64 { return &n.Node.Allocatable.MemoryBytes }),
		field("allocatable_pods", "bigint", func(n *store.NodeCapacity) *int64 { return &n.Node.Allocatable.Pods }),
		otherField("capacity_other", func(n *store.NodeCapacity) *map[string]int64 { return &n.Node.Capacity.Other }),
		otherField("allocatable_other", func(n *store.NodeCapacity) *map[string]int64 { return &n.Node.Allocatable.Other }),
		field("unschedulable", "boolean", func(n *store.NodeCapacity) *bool { return &n.Node.Unschedulable }),
		field("ready", "boolean", func(n *store.NodeCapacity) *bool { return &n.Node.Ready }),
		jsonField("conditions", func(n *store.NodeCapacity) *[]store.NodeCondition { return &n.Node.Conditions }, "[]"),
		jsonField("taints", func(n *store.NodeCapacity) *[]store.Taint { return &n.Node.Taints }, "[]"),
		col("schedulable", func(n *store.NodeCapacity) *bool { return &n.Schedulable }),
		{name: "unschedulable_reason", target: func(n *store.NodeCapacity) any { return nullable(&n.UnschedulableReason) }},
		col("requested_cpu_millis", func(n *store.NodeCapacity) *int64 { return &n.Requested.CPUMillis }),
		col("requested_memory_bytes", func(n *store.NodeCapacity) *int64 { return &n.Requested.MemoryBytes }),
		col("pod_count", func(n *store.NodeCapacity) *int64 { return &n.Requested.Pods }),
		otherCol("requested_other", func(n *store.NodeCapacity) *map[string]int64 { return &n.Requested.Other }),
		{name: "usage_cpu_nanocores", target: func(n *store.NodeCapacity) any { return nullable(&nodeUsage(n).CPUNanoCores) }},
		{name: "usage_memory_bytes", target: func(n *store.NodeCapacity) any { return nullable(&nodeUsage(n).MemoryBytes) }},
		{name: "usage_observed_at", target: func(n *store.NodeCapacity) any { return nullable(&nodeUsage(n).Timestamp) }},
		{name: "usage_window_seconds", target: func(n *store.NodeCapacity) any { return seconds{&nodeUsage(n).Window} }},
		col("first_seen", func(n *store.NodeCapacity) *time.Time { return &n.FirstSeen }),
		col("resource_version", func(n *store.NodeCapacity) *int64 { return &n.ResourceVersion }),
	}, deviceCols("devices", func(n *store.NodeCapacity) *map[string]store.DeviceCount { return &n.Devices })...),
	finish: func(n *store.NodeCapacity) {
		if n.Usage.Timestamp.IsZero() {
			n.Usage = nil // never scraped, or expired
		}
		if !n.Schedulable && n.UnschedulableReason == "" {
			// A change-feed entry written before migration 008.
			n.UnschedulableReason = n.Node.UnschedulableReason()
		}
	},
})

// nodeUsage is the usage a scan fills in, made on first use.
func nodeUsage(n *store.NodeCapacity) *store.Usage {
	if n.Usage == nil {
		n.Usage = &store.Usage{}
	}
	return n.Usage
}

// NodeCapacities serves NodeCapacity records by object name.
func (s *Store) NodeCapacities() store.Source[store.NodeCapacity] { return nodeCapacityView.source(s) }

// GetNodeCapacity returns one node's view.
func (s *Store) GetNodeCapacity(ctx context.Context, clusterID, node string) (*store.NodeCapacity, error) {
	return nodeCapacityView.get(ctx, s, store.ListKey{clusterID, node})
}
