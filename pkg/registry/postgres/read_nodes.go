package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/example/platform-apiserver/pkg/registry/store"
)

var (
	// nodeColumns are the columns scanNodeCapacity reads, in its order.
	nodeColumns = statement("node_columns")
	sqlGetNode  = statement("read_get_node")
)

var nodeCapacityList = listSpec[store.NodeCapacity]{
	kind:    nodeCapacityKind,
	table:   "cluster_node",
	columns: nodeColumns,
	order:   [2]string{"cluster_id", "name"},
	scan:    scanNodeCapacity,
	key:     func(n store.NodeCapacity) store.ListKey { return store.ListKey{n.ClusterID, n.Node.Name} },
}

// GetNodeCapacity returns one node's view.
func (s *Store) GetNodeCapacity(ctx context.Context, clusterID, node string) (*store.NodeCapacity, error) {
	n, err := getRow(ctx, s.reads, scanNodeCapacity, sqlGetNode, clusterID, node)
	if err != nil {
		return nil, fmt.Errorf("get nodecapacity %s.%s: %w", clusterID, node, interpretError(err))
	}
	return &n, nil
}

// StreamNodeCapacities streams the NodeCapacities matching opts in keyset pages (see stream).
func (s *Store) StreamNodeCapacities(ctx context.Context, opts store.ListOptions, pageSize int, yield func(store.StreamPage[store.NodeCapacity]) error) error {
	return stream(ctx, s, nodeCapacityList, opts, pageSize, yield)
}

// ListNodeCapacities lists node views ordered by (cluster, node).
func (s *Store) ListNodeCapacities(ctx context.Context, opts store.ListOptions) (*store.Page[store.NodeCapacity], error) {
	return list(ctx, s, nodeCapacityList, opts)
}

func scanNodeCapacity(row pgx.Row) (store.NodeCapacity, error) {
	var (
		n        store.NodeCapacity
		created  *time.Time
		cpu, mem *int64
		observed *time.Time
		window   *float64
		reason   *string
	)
	err := row.Scan(&n.ClusterID, &n.Node.Name, &n.Node.UID, &n.Node.Labels, &created,
		&n.Node.Capacity.CPUMillis, &n.Node.Capacity.MemoryBytes, &n.Node.Capacity.Pods,
		&n.Node.Allocatable.CPUMillis, &n.Node.Allocatable.MemoryBytes, &n.Node.Allocatable.Pods,
		&n.Node.Unschedulable, &n.Node.Ready, &n.Node.Conditions, &n.Node.Taints, &n.Schedulable, &reason,
		&n.Requested.CPUMillis, &n.Requested.MemoryBytes, &n.Requested.Pods,
		&cpu, &mem, &observed, &window,
		&n.FirstSeen, &n.ResourceVersion)
	if err != nil {
		return n, err
	}
	if created != nil {
		n.Node.CreatedAt = *created
	}
	if reason != nil {
		n.UnschedulableReason = *reason
	} else { // a change-feed entry written before migration 008
		n.UnschedulableReason = n.Node.UnschedulableReason()
	}
	if observed != nil && cpu != nil && mem != nil {
		u := &store.Usage{CPUNanoCores: *cpu, MemoryBytes: *mem, Timestamp: *observed}
		if window != nil {
			u.Window = time.Duration(*window * float64(time.Second))
		}
		n.Usage = u
	}
	return n, nil
}
