package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/example/platform-apiserver/pkg/registry/store"
)

var (
	// capacityColumns are the columns scanClusterCapacity reads, in its order.
	capacityColumns = statement("capacity_columns")
	sqlGetCapacity  = statement("read_get_capacity")
)

// clusterCapacityList lists cluster_capacity, whose rows the node and
// namespace triggers of migration 009 keep; name is the cluster id again.
var clusterCapacityList = listSpec[store.ClusterCapacity]{
	kind:    clusterCapacityKind,
	table:   "cluster_capacity",
	columns: capacityColumns,
	order:   [2]string{"cluster_id", "name"},
	scan:    scanClusterCapacity,
	key:     func(c store.ClusterCapacity) [2]string { return [2]string{c.ClusterID, c.ClusterID} },
}

var clusterCapacityFeed = feedKind[store.ClusterCapacity]{
	kind: store.KindClusterCapacity,
	list: clusterCapacityList,
	set: func(c *store.Change, v *store.ClusterCapacity, prev bool) {
		if prev {
			c.PrevClusterCapacity = v
		} else {
			c.ClusterCapacity = v
		}
	},
}

// GetClusterCapacity returns one member's capacity view.
func (s *Store) GetClusterCapacity(ctx context.Context, clusterID string) (*store.ClusterCapacity, error) {
	c, err := scanClusterCapacity(s.pool.QueryRow(ctx, sqlGetCapacity, clusterID))
	if err != nil {
		return nil, fmt.Errorf("get clustercapacity %s: %w", clusterID, interpretError(err))
	}
	return &c, nil
}

// ListClusterCapacities lists member capacity views ordered by cluster id.
func (s *Store) ListClusterCapacities(ctx context.Context, opts store.ListOptions) (*store.Page[store.ClusterCapacity], error) {
	return list(ctx, s, clusterCapacityList, opts)
}

// StreamClusterCapacities streams the ClusterCapacities matching opts from one snapshot (see stream).
func (s *Store) StreamClusterCapacities(ctx context.Context, opts store.ListOptions, pageSize int, yield func(rv int64, page []store.ClusterCapacity) error) error {
	return stream(ctx, s, clusterCapacityList, opts, pageSize, yield)
}

// ClusterCapacities reads ClusterCapacity records by object name, the cluster id.
func (s *Store) ClusterCapacities() store.Source[store.ClusterCapacity] {
	return store.Source[store.ClusterCapacity]{
		Get: func(ctx context.Context, _, name string) (*store.ClusterCapacity, error) {
			return s.GetClusterCapacity(ctx, name)
		},
		List:   s.ListClusterCapacities,
		Stream: s.StreamClusterCapacities,
	}
}

func scanClusterCapacity(row pgx.Row) (store.ClusterCapacity, error) {
	var (
		c             store.ClusterCapacity
		freeCPU, free *int64
	)
	a, sc := &c.All, &c.Schedulable
	err := row.Scan(&c.ClusterID, &c.Labels,
		&c.Nodes, &c.NodesReady, &c.NodesSchedulable, &c.NodesCordoned, &c.NodesTainted,
		&a.Allocatable.CPUMillis, &a.Allocatable.MemoryBytes, &a.Allocatable.Pods,
		&a.Requested.CPUMillis, &a.Requested.MemoryBytes, &a.Requested.Pods,
		&a.UsageCPUNanoCores, &a.UsageMemoryBytes, &a.UsageNodes,
		&sc.Allocatable.CPUMillis, &sc.Allocatable.MemoryBytes, &sc.Allocatable.Pods,
		&sc.Requested.CPUMillis, &sc.Requested.MemoryBytes, &sc.Requested.Pods,
		&sc.UsageCPUNanoCores, &sc.UsageMemoryBytes, &sc.UsageNodes,
		&freeCPU, &free, &c.HasRoom, &c.HasRoomSince,
		&c.Namespaces, &c.Pods, &c.FirstSeen, &c.ResourceVersion)
	if err != nil {
		return c, err
	}
	if freeCPU != nil && free != nil {
		c.MaxFree = &store.Resources{CPUMillis: *freeCPU, MemoryBytes: *free}
	}
	return c, nil
}
