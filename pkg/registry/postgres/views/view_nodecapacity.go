package views

import (
	"strings"
	"time"

	"github.com/example/platform-apiserver/pkg/registry/store"
)

// NodeCapacity is cluster_node: one row per member node, named
// <cluster id>.<node name> (a cluster id holds no dot).
var NodeCapacity = Declare(View[store.NodeCapacity]{
	Kind: store.KindNodeCapacity, Resource: "nodecapacities", Table: "cluster_node",
	Order:      [2]string{"cluster_id", "name"},
	Aggregates: []string{"requested_cpu_millis", "requested_memory_bytes", "pod_count", "requested_other", "devices_total", "devices_allocated"},
	Key:        func(n *store.NodeCapacity) store.ListKey { return store.ListKey{n.ClusterID, n.Node.Name} },
	Name: func(_, name string) (store.ListKey, bool) {
		cluster, node, ok := strings.Cut(name, ".")
		return store.ListKey{cluster, node}, ok && cluster != "" && node != ""
	},
	Columns: append([]Column[store.NodeCapacity]{
		Col("cluster_id", func(n *store.NodeCapacity) *string { return &n.ClusterID }),
		Field("name", "text", func(n *store.NodeCapacity) *string { return &n.Node.Name }),
		Field("uid", "text", func(n *store.NodeCapacity) *string { return &n.Node.UID }),
		JSONField("labels", func(n *store.NodeCapacity) *map[string]string { return &n.Node.Labels }, "{}"),
		{name: "created_at", sqlType: "timestamptz", target: func(n *store.NodeCapacity) any { return nullable(&n.Node.CreatedAt) },
			value: func(n *store.NodeCapacity) any { return timeOrNil(n.Node.CreatedAt) }},
		Field("capacity_cpu_millis", "bigint", func(n *store.NodeCapacity) *int64 { return &n.Node.Capacity.CPUMillis }),
		Field("capacity_memory_bytes", "bigint", func(n *store.NodeCapacity) *int64 { return &n.Node.Capacity.MemoryBytes }),
		Field("capacity_pods", "bigint", func(n *store.NodeCapacity) *int64 { return &n.Node.Capacity.Pods }),
		Field("allocatable_cpu_millis", "bigint", func(n *store.NodeCapacity) *int64 { return &n.Node.Allocatable.CPUMillis }),
		Field("allocatable_memory_bytes", "bigint", func(n *store.NodeCapacity) *int64 { return &n.Node.Allocatable.MemoryBytes }),
		Field("allocatable_pods", "bigint", func(n *store.NodeCapacity) *int64 { return &n.Node.Allocatable.Pods }),
		otherField("capacity_other", func(n *store.NodeCapacity) *map[string]int64 { return &n.Node.Capacity.Other }),
		otherField("allocatable_other", func(n *store.NodeCapacity) *map[string]int64 { return &n.Node.Allocatable.Other }),
		Field("unschedulable", "boolean", func(n *store.NodeCapacity) *bool { return &n.Node.Unschedulable }),
		Field("ready", "boolean", func(n *store.NodeCapacity) *bool { return &n.Node.Ready }),
		JSONField("conditions", func(n *store.NodeCapacity) *[]store.NodeCondition { return &n.Node.Conditions }, "[]"),
		JSONField("taints", func(n *store.NodeCapacity) *[]store.Taint { return &n.Node.Taints }, "[]"),
		Col("schedulable", func(n *store.NodeCapacity) *bool { return &n.Schedulable }),
		{name: "unschedulable_reason", target: func(n *store.NodeCapacity) any { return nullable(&n.UnschedulableReason) }},
		Col("requested_cpu_millis", func(n *store.NodeCapacity) *int64 { return &n.Requested.CPUMillis }),
		Col("requested_memory_bytes", func(n *store.NodeCapacity) *int64 { return &n.Requested.MemoryBytes }),
		Col("pod_count", func(n *store.NodeCapacity) *int64 { return &n.Requested.Pods }),
		otherCol("requested_other", func(n *store.NodeCapacity) *map[string]int64 { return &n.Requested.Other }),
		{name: "usage_cpu_nanocores", target: func(n *store.NodeCapacity) any { return nullable(&nodeUsage(n).CPUNanoCores) }},
		{name: "usage_memory_bytes", target: func(n *store.NodeCapacity) any { return nullable(&nodeUsage(n).MemoryBytes) }},
		{name: "usage_observed_at", target: func(n *store.NodeCapacity) any { return nullable(&nodeUsage(n).Timestamp) }},
		{name: "usage_window_seconds", target: func(n *store.NodeCapacity) any { return seconds{&nodeUsage(n).Window} }},
		Col("first_seen", func(n *store.NodeCapacity) *time.Time { return &n.FirstSeen }),
		Col("resource_version", func(n *store.NodeCapacity) *int64 { return &n.ResourceVersion }),
	}, deviceCols("devices", func(n *store.NodeCapacity) *map[string]store.DeviceCount { return &n.Devices })...),
	Finish: func(n *store.NodeCapacity) {
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
