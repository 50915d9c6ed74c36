package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/example/platform-apiserver/pkg/registry/postgres/pgdb"
	"github.com/example/platform-apiserver/pkg/registry/store"
)

// clusterCapacityView is cluster_capacity, whose rows the node and
// namespace triggers of migration 009 keep; name is the cluster id again.
var clusterCapacityView = newView(view[store.ClusterCapacity]{
	kind: store.KindClusterCapacity, resource: "clustercapacities", table: "cluster_capacity",
	order:   [2]string{"cluster_id", "name"},
	key:     func(c *store.ClusterCapacity) store.ListKey { return store.ListKey{c.ClusterID, c.ClusterID} },
	name:    func(_, name string) (store.ListKey, bool) { return store.ListKey{name, name}, name != "" },
	columns: clusterCapacityColumns(),
	finish: func(c *store.ClusterCapacity) {
		if c.Devices != nil && c.Devices.API == "" {
			c.Devices = nil // discovery has not looked at the member's DRA API
		}
	},
})

// clusterCapacityColumns are cluster_capacity's columns: counts, the sums
// of All and of Schedulable (the same columns each), then the rest.
func clusterCapacityColumns() []column[store.ClusterCapacity] {
	cols := []column[store.ClusterCapacity]{
		col("cluster_id", func(c *store.ClusterCapacity) *string { return &c.ClusterID }),
		col("labels", func(c *store.ClusterCapacity) *map[string]string { return &c.Labels }),
		col("nodes", func(c *store.ClusterCapacity) *int64 { return &c.Nodes }),
		col("nodes_ready", func(c *store.ClusterCapacity) *int64 { return &c.NodesReady }),
		col("nodes_schedulable", func(c *store.ClusterCapacity) *int64 { return &c.NodesSchedulable }),
		col("nodes_cordoned", func(c *store.ClusterCapacity) *int64 { return &c.NodesCordoned }),
		col("nodes_tainted", func(c *store.ClusterCapacity) *int64 { return &c.NodesTainted }),
	}
	for _, group := range []struct {
		prefix string
		sums   func(*store.ClusterCapacity) *store.CapacitySums
	}{{"all_", func(c *store.ClusterCapacity) *store.CapacitySums { return &c.All }}, {"sched_", func(c *store.ClusterCapacity) *store.CapacitySums { return &c.Schedulable }}} {
		sum := func(name string, field func(*store.CapacitySums) *int64) column[store.ClusterCapacity] {
			return column[store.ClusterCapacity]{name: group.prefix + name, target: func(c *store.ClusterCapacity) any { return sat(field(group.sums(c))) }}
		}
		cols = append(cols,
			sum("allocatable_cpu_millis", func(s *store.CapacitySums) *int64 { return &s.Allocatable.CPUMillis }),
			sum("allocatable_memory_bytes", func(s *store.CapacitySums) *int64 { return &s.Allocatable.MemoryBytes }),
			sum("allocatable_pods", func(s *store.CapacitySums) *int64 { return &s.Allocatable.Pods }),
			sum("requested_cpu_millis", func(s *store.CapacitySums) *int64 { return &s.Requested.CPUMillis }),
			sum("requested_memory_bytes", func(s *store.CapacitySums) *int64 { return &s.Requested.MemoryBytes }),
			sum("requested_pods", func(s *store.CapacitySums) *int64 { return &s.Requested.Pods }),
			sum("usage_cpu_nanocores", func(s *store.CapacitySums) *int64 { return &s.UsageCPUNanoCores }),
			sum("usage_memory_bytes", func(s *store.CapacitySums) *int64 { return &s.UsageMemoryBytes }),
			col(group.prefix+"usage_nodes", func(c *store.ClusterCapacity) *int64 { return &group.sums(c).UsageNodes }),
			otherCol(group.prefix+"allocatable_other", func(c *store.ClusterCapacity) *map[string]int64 { return &group.sums(c).Allocatable.Other }),
			otherCol(group.prefix+"requested_other", func(c *store.ClusterCapacity) *map[string]int64 { return &group.sums(c).Requested.Other }),
		)
	}
	return append(append(cols,
		column[store.ClusterCapacity]{name: "max_free_cpu_millis", target: func(c *store.ClusterCapacity) any {
			return maxFree{c, func(r *store.Resources) *int64 { return &r.CPUMillis }}
		}},
		column[store.ClusterCapacity]{name: "max_free_memory_bytes", target: func(c *store.ClusterCapacity) any {
			return maxFree{c, func(r *store.Resources) *int64 { return &r.MemoryBytes }}
		}},
		// after max_free_cpu_millis, which decides whether MaxFree is set
		column[store.ClusterCapacity]{name: "max_free_other", target: func(c *store.ClusterCapacity) any { return maxFreeOther{c} }},
		otherCol("nodes_with", func(c *store.ClusterCapacity) *map[string]int64 { return &c.NodesWith }),
		col("has_room", func(c *store.ClusterCapacity) *bool { return &c.HasRoom }),
		col("has_room_since", func(c *store.ClusterCapacity) *time.Time { return &c.HasRoomSince }),
		col("mirroring", func(c *store.ClusterCapacity) *store.MemberState { return &c.Mirroring }),
		column[store.ClusterCapacity]{name: "mirroring_since", target: func(c *store.ClusterCapacity) any { return nullable(&c.MirroringSince) }},
		col("namespaces", func(c *store.ClusterCapacity) *int64 { return &c.Namespaces }),
		col("pods", func(c *store.ClusterCapacity) *int64 { return &c.Pods }),
		col("first_seen", func(c *store.ClusterCapacity) *time.Time { return &c.FirstSeen }),
		col("resource_version", func(c *store.ClusterCapacity) *int64 { return &c.ResourceVersion }),
		column[store.ClusterCapacity]{name: "last_change_at", target: func(c *store.ClusterCapacity) any { return nullable(&c.LastChange) }},
		column[store.ClusterCapacity]{name: "usage_observed_at", target: func(c *store.ClusterCapacity) any { return nullable(&c.LastUsage) }},
		column[store.ClusterCapacity]{name: "complete_as_of", target: func(c *store.ClusterCapacity) any { return nullable(&c.CompleteAsOf) }},
		column[store.ClusterCapacity]{name: "member_apis", target: func(c *store.ClusterCapacity) any { return memberAPIs{c} }},
		otherCol("devices_nodes", func(c *store.ClusterCapacity) *map[string]int64 { return &memberDevices(c).Nodes }),
	), deviceCols("devices", func(c *store.ClusterCapacity) *map[string]store.DeviceCount { return &memberDevices(c).Drivers })...)
}

// memberDevices is the member's devices a scan fills in, made on first use.
func memberDevices(c *store.ClusterCapacity) *store.MemberDevices {
	if c.Devices == nil {
		c.Devices = &store.MemberDevices{}
	}
	return c.Devices
}

// memberAPIs scans member_apis (per DRA resource its state; NULL in a
// change-log entry from before migration 016) into Devices.API: Served
// when every DRA resource is, else the state of one that is not; ""
// before discovery looked.
type memberAPIs struct{ c *store.ClusterCapacity }

// Scan implements sql.Scanner.
func (m memberAPIs) Scan(src any) error {
	raw, err := jsonbBytes(src, "member APIs")
	if err != nil {
		return err
	}
	var apis map[store.Resource]store.APIState
	if raw != nil {
		if err := json.Unmarshal(raw, &apis); err != nil {
			return fmt.Errorf("member APIs: %w", err)
		}
	}
	if len(apis) == 0 {
		return nil
	}
	api := store.APIServed
	for _, r := range deviceResources {
		if st, ok := apis[r]; ok && st != store.APIServed {
			api = st
		}
	}
	memberDevices(m.c).API = api
	return nil
}

// maxFree scans one of the largest free resources of a schedulable node,
// NULL (no schedulable node) in both columns together, into MaxFree.
type maxFree struct {
	c     *store.ClusterCapacity
	field func(*store.Resources) *int64
}

// ScanNumeric implements pgtype.NumericScanner.
func (m maxFree) ScanNumeric(n pgtype.Numeric) error {
	if !n.Valid {
		m.c.MaxFree = nil
		return nil
	}
	if m.c.MaxFree == nil {
		m.c.MaxFree = &store.Resources{}
	}
	return sat(m.field(m.c.MaxFree)).ScanNumeric(n)
}

// maxFreeOther scans max_free_other into MaxFree.Other, once MaxFree is
// set (the member has a schedulable node).
type maxFreeOther struct{ c *store.ClusterCapacity }

// Scan implements sql.Scanner.
func (m maxFreeOther) Scan(src any) error {
	var other map[string]int64
	if err := (amounts{&other}).Scan(src); err != nil {
		return err
	}
	if m.c.MaxFree != nil {
		m.c.MaxFree.Other = other
	}
	return nil
}

// ClusterCapacities serves ClusterCapacity records by object name, the cluster id.
func (s *Store) ClusterCapacities() store.Source[store.ClusterCapacity] {
	return clusterCapacityView.source(s)
}

// GetClusterCapacity returns one member's capacity view.
func (s *Store) GetClusterCapacity(ctx context.Context, clusterID string) (*store.ClusterCapacity, error) {
	return clusterCapacityView.get(ctx, s, store.ListKey{clusterID, clusterID})
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

var sqlMemberHeartbeats = statement("member_heartbeats")

// MemberHeartbeats returns every member's mirror heartbeat
// (ClusterCapacity status.mirroring.completeAsOf) by cluster id.
func (s *Store) MemberHeartbeats(ctx context.Context) (map[string]time.Time, error) {
	beats := map[string]time.Time{}
	err := s.readTx(ctx, store.Freshness{}, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, sqlMemberHeartbeats)
		if err != nil {
			return err
		}
		var id string
		var at time.Time
		_, err = pgx.ForEachRow(rows, []any{&id, &at}, func() error {
			beats[id] = at
			return nil
		})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("read the members' heartbeats: %w", pgdb.InterpretError(err))
	}
	return beats, nil
}

// opMemberState labels the commit-order metrics of RecordMemberState.
const opMemberState op = "member_state"

// RecordMemberState records a member's mirroring state, the time of the
// last change mirrored, its usage heartbeat and how far its mirror is
// complete on its ClusterCapacity when any moved, creating the row of a member that has none yet, fenced like
// every discovery write.
func (s *Store) RecordMemberState(ctx context.Context, f store.Fence, st store.MemberStatus) error {
	err := s.write(ctx, opMemberState, sections{
		member: func(w *writer) error { return w.fence(f) },
		views: func(w *writer) error {
			return w.stamp("record member state", sqlMemberState, f.ClusterID, string(st.State), nonZero(st.LastChange), nonZero(st.LastUsage), nonZero(st.CompleteAsOf))
		},
	})
	if err != nil {
		return fmt.Errorf("record state of member %s: %w", f.ClusterID, err)
	}
	return nil
}

// nonZero is t, or nil (SQL NULL) when t is zero.
func nonZero(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}
