package views

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

// ClusterCapacity is cluster_capacity, whose rows the node and
// namespace triggers of migration 009 keep; name is the cluster id again.
var ClusterCapacity = Declare(View[store.ClusterCapacity]{
	Kind: store.KindClusterCapacity, Resource: "clustercapacities", Table: "cluster_capacity",
	Order:   [2]string{"cluster_id", "name"},
	Key:     func(c *store.ClusterCapacity) store.ListKey { return store.ListKey{c.ClusterID, c.ClusterID} },
	Name:    func(_, name string) (store.ListKey, bool) { return store.ListKey{name, name}, name != "" },
	Columns: clusterCapacityColumns(),
	Finish: func(c *store.ClusterCapacity) {
		if c.Devices != nil && c.Devices.API == "" {
			c.Devices = nil // discovery has not looked at the member's DRA API
		}
	},
})

// clusterCapacityColumns are cluster_capacity's columns: counts, the sums
// of All and of Schedulable (the same columns each), then the rest.
func clusterCapacityColumns() []Column[store.ClusterCapacity] {
	cols := []Column[store.ClusterCapacity]{
		Col("cluster_id", func(c *store.ClusterCapacity) *string { return &c.ClusterID }),
		Col("labels", func(c *store.ClusterCapacity) *map[string]string { return &c.Labels }),
		Col("nodes", func(c *store.ClusterCapacity) *int64 { return &c.Nodes }),
		Col("nodes_ready", func(c *store.ClusterCapacity) *int64 { return &c.NodesReady }),
		Col("nodes_schedulable", func(c *store.ClusterCapacity) *int64 { return &c.NodesSchedulable }),
		Col("nodes_cordoned", func(c *store.ClusterCapacity) *int64 { return &c.NodesCordoned }),
		Col("nodes_tainted", func(c *store.ClusterCapacity) *int64 { return &c.NodesTainted }),
	}
	for _, group := range []struct {
		prefix string
		sums   func(*store.ClusterCapacity) *store.CapacitySums
	}{{"all_", func(c *store.ClusterCapacity) *store.CapacitySums { return &c.All }}, {"sched_", func(c *store.ClusterCapacity) *store.CapacitySums { return &c.Schedulable }}} {
		sum := func(name string, field func(*store.CapacitySums) *int64) Column[store.ClusterCapacity] {
			return Column[store.ClusterCapacity]{name: group.prefix + name, target: func(c *store.ClusterCapacity) any { return sat(field(group.sums(c))) }}
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
			Col(group.prefix+"usage_nodes", func(c *store.ClusterCapacity) *int64 { return &group.sums(c).UsageNodes }),
			otherCol(group.prefix+"allocatable_other", func(c *store.ClusterCapacity) *map[string]int64 { return &group.sums(c).Allocatable.Other }),
			otherCol(group.prefix+"requested_other", func(c *store.ClusterCapacity) *map[string]int64 { return &group.sums(c).Requested.Other }),
		)
	}
	return append(append(cols,
		Column[store.ClusterCapacity]{name: "max_free_cpu_millis", target: func(c *store.ClusterCapacity) any {
			return maxFree{c, func(r *store.Quantities) *int64 { return &r.CPUMillis }}
		}},
		Column[store.ClusterCapacity]{name: "max_free_memory_bytes", target: func(c *store.ClusterCapacity) any {
			return maxFree{c, func(r *store.Quantities) *int64 { return &r.MemoryBytes }}
		}},
		// after max_free_cpu_millis, which decides whether MaxFree is set
		Column[store.ClusterCapacity]{name: "max_free_other", target: func(c *store.ClusterCapacity) any { return maxFreeOther{c} }},
		otherCol("nodes_with", func(c *store.ClusterCapacity) *map[string]int64 { return &c.NodesWith }),
		Col("has_room", func(c *store.ClusterCapacity) *bool { return &c.HasRoom }),
		Col("has_room_since", func(c *store.ClusterCapacity) *time.Time { return &c.HasRoomSince }),
		Col("mirroring", func(c *store.ClusterCapacity) *store.MemberState { return &c.Mirroring }),
		Column[store.ClusterCapacity]{name: "mirroring_since", target: func(c *store.ClusterCapacity) any { return nullable(&c.MirroringSince) }},
		Col("namespaces", func(c *store.ClusterCapacity) *int64 { return &c.Namespaces }),
		Col("pods", func(c *store.ClusterCapacity) *int64 { return &c.Pods }),
		Col("first_seen", func(c *store.ClusterCapacity) *time.Time { return &c.FirstSeen }),
		Col("resource_version", func(c *store.ClusterCapacity) *int64 { return &c.ResourceVersion }),
		Column[store.ClusterCapacity]{name: "last_change_at", target: func(c *store.ClusterCapacity) any { return nullable(&c.LastChange) }},
		Column[store.ClusterCapacity]{name: "usage_observed_at", target: func(c *store.ClusterCapacity) any { return nullable(&c.LastUsage) }},
		Column[store.ClusterCapacity]{name: "complete_as_of", target: func(c *store.ClusterCapacity) any { return nullable(&c.CompleteAsOf) }},
		Column[store.ClusterCapacity]{name: "member_apis", target: func(c *store.ClusterCapacity) any { return memberAPIs{c} }},
		otherCol("devices_nodes", func(c *store.ClusterCapacity) *map[string]int64 { return &memberDevices(c).Nodes }),
		decimalCol("quota_hard", func(c *store.ClusterCapacity) *map[string]string { return &c.Committed.Hard }),
		decimalCol("quota_used", func(c *store.ClusterCapacity) *map[string]string { return &c.Committed.Used }),
		decimalCol("quota_scoped_hard", func(c *store.ClusterCapacity) *map[string]string { return &c.Committed.ScopedHard }),
		decimalCol("quota_scoped_used", func(c *store.ClusterCapacity) *map[string]string { return &c.Committed.ScopedUsed }),
	), deviceCols("devices", func(c *store.ClusterCapacity) *map[string]store.DeviceCount { return &memberDevices(c).Drivers })...)
}

// memberDevices is the member's devices a scan fills in, made on first use.
func memberDevices(c *store.ClusterCapacity) *store.MemberDevices {
	if c.Devices == nil {
		c.Devices = &store.MemberDevices{}
	}
	return c.Devices
}

// DeviceResources are the member resources the device counts come from,
// each with its API state in member_apis.
var DeviceResources = []store.Resource{store.ResourceResourceSlices, store.ResourceResourceClaims}

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
	for _, r := range DeviceResources {
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
	field func(*store.Quantities) *int64
}

// ScanNumeric implements pgtype.NumericScanner.
func (m maxFree) ScanNumeric(n pgtype.Numeric) error {
	if !n.Valid {
		m.c.MaxFree = nil
		return nil
	}
	if m.c.MaxFree == nil {
		m.c.MaxFree = &store.Quantities{}
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

var sqlMemberHeartbeats = statement("member_heartbeats")

// MemberHeartbeats returns every member's mirror heartbeat
// (ClusterCapacity status.mirroring.completeAsOf) by cluster id.
func MemberHeartbeats(ctx context.Context, db Reader) (map[string]time.Time, error) {
	beats := map[string]time.Time{}
	err := db.ReadTx(ctx, store.Freshness{}, func(tx pgx.Tx) error {
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
