package postgres

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

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
	key:     func(c store.ClusterCapacity) store.ListKey { return store.ListKey{c.ClusterID, c.ClusterID} },
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
	c, err := getRow(ctx, s.reads, scanClusterCapacity, sqlGetCapacity, clusterID)
	if err != nil {
		return nil, fmt.Errorf("get clustercapacity %s: %w", clusterID, interpretError(err))
	}
	return &c, nil
}

// ListClusterCapacities lists member capacity views ordered by cluster id.
func (s *Store) ListClusterCapacities(ctx context.Context, opts store.ListOptions) (*store.Page[store.ClusterCapacity], error) {
	return list(ctx, s, clusterCapacityList, opts)
}

// StreamClusterCapacities streams the ClusterCapacities matching opts in keyset pages (see stream).
func (s *Store) StreamClusterCapacities(ctx context.Context, opts store.ListOptions, pageSize int, yield func(store.StreamPage[store.ClusterCapacity]) error) error {
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
		Key:    keyOf(clusterCapacityList),
	}
}

func scanClusterCapacity(row pgx.Row) (store.ClusterCapacity, error) {
	var (
		c                 store.ClusterCapacity
		freeCPU, free     saturated
		since, lastChange *time.Time
	)
	a, sc := &c.All, &c.Schedulable
	err := row.Scan(&c.ClusterID, &c.Labels,
		&c.Nodes, &c.NodesReady, &c.NodesSchedulable, &c.NodesCordoned, &c.NodesTainted,
		sat(&a.Allocatable.CPUMillis), sat(&a.Allocatable.MemoryBytes), sat(&a.Allocatable.Pods),
		sat(&a.Requested.CPUMillis), sat(&a.Requested.MemoryBytes), sat(&a.Requested.Pods),
		sat(&a.UsageCPUNanoCores), sat(&a.UsageMemoryBytes), &a.UsageNodes,
		sat(&sc.Allocatable.CPUMillis), sat(&sc.Allocatable.MemoryBytes), sat(&sc.Allocatable.Pods),
		sat(&sc.Requested.CPUMillis), sat(&sc.Requested.MemoryBytes), sat(&sc.Requested.Pods),
		sat(&sc.UsageCPUNanoCores), sat(&sc.UsageMemoryBytes), &sc.UsageNodes,
		&freeCPU, &free, &c.HasRoom, &c.HasRoomSince, &c.Mirroring, &since,
		&c.Namespaces, &c.Pods, &c.FirstSeen, &c.ResourceVersion, &lastChange)
	if err != nil {
		return c, err
	}
	if since != nil {
		c.MirroringSince = *since
	}
	if lastChange != nil {
		c.LastChange = *lastChange
	}
	if freeCPU.valid && free.valid {
		c.MaxFree = &store.Resources{CPUMillis: freeCPU.v, MemoryBytes: free.v}
	}
	return c, nil
}

// saturated scans a numeric sum of int64 quantities, which may exceed
// int64, into an int64 that stops at its bounds; valid is false for NULL.
type saturated struct {
	v     int64
	valid bool
	into  *int64
}

func sat(into *int64) *saturated { return &saturated{into: into} }

// ScanNumeric implements pgtype.NumericScanner.
func (s *saturated) ScanNumeric(n pgtype.Numeric) error {
	s.v, s.valid = 0, n.Valid
	if n.Valid {
		v, err := n.Int64Value()
		switch {
		case err == nil:
			s.v = v.Int64
		case n.Int.Sign() < 0:
			s.v = math.MinInt64
		default:
			s.v = math.MaxInt64
		}
	}
	if s.into != nil {
		*s.into = s.v
	}
	return nil
}

var sqlMemberState = statement("member_state")

// opMemberState labels the writer-lock metrics of RecordMemberState.
const opMemberState op = "member_state"

// RecordMemberState records a member's mirroring state, and the time of
// the last change mirrored, on its ClusterCapacity when either moved,
// creating the row of a member that has none yet, fenced like every
// discovery write.
func (s *Store) RecordMemberState(ctx context.Context, f store.Fence, st store.MemberStatus) error {
	var lastChange *time.Time
	if !st.LastChange.IsZero() {
		lastChange = &st.LastChange
	}
	err := s.write(ctx, opMemberState, sections{
		member: func(w *writer) error { return w.fence(f) },
		views: func(w *writer) error {
			return w.stamp("record member state", sqlMemberState, f.ClusterID, string(st.State), lastChange)
		},
	})
	if err != nil {
		return fmt.Errorf("record state of member %s: %w", f.ClusterID, err)
	}
	return nil
}
