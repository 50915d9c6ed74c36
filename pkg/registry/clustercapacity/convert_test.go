package clustercapacity

import (
	"context"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/example/platform-apiserver/pkg/apis/platform"
	"github.com/example/platform-apiserver/pkg/registry"
	"github.com/example/platform-apiserver/pkg/registry/store"
)

func record() store.ClusterCapacity {
	since := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	return store.ClusterCapacity{
		ClusterID: "prod-1", Nodes: 5, NodesReady: 4, NodesSchedulable: 3, NodesCordoned: 1, NodesTainted: 1,
		All: store.CapacitySums{Allocatable: store.Quantities{CPUMillis: 80000, MemoryBytes: 320 << 30, Pods: 550},
			Requested: store.Quantities{CPUMillis: 60000, MemoryBytes: 100 << 30, Pods: 70}},
		Schedulable: store.CapacitySums{Allocatable: store.Quantities{CPUMillis: 64000, MemoryBytes: 256 << 30, Pods: 330},
			Requested:         store.Quantities{CPUMillis: 52000, MemoryBytes: 64 << 30, Pods: 40},
			UsageCPUNanoCores: 30_500_000_000, UsageMemoryBytes: 50 << 30, UsageNodes: 2},
		MaxFree: &store.Quantities{CPUMillis: 6500, MemoryBytes: 90 << 30},
		HasRoom: true, HasRoomSince: since, Namespaces: 7, Pods: 75, ResourceVersion: 42,
	}
}

func TestSyncedCondition(t *testing.T) {
	since := time.Date(2026, 12, 1, 11, 0, 0, 0, time.UTC)
	tests := []struct {
		state  store.MemberState
		status metav1.ConditionStatus
		reason string
	}{
		{"", metav1.ConditionUnknown, platform.ReasonNotReported},
		{store.MemberSynced, metav1.ConditionTrue, "Synced"},
		{store.MemberUnreachable, metav1.ConditionFalse, "Unreachable"},
		{store.MemberLagging, metav1.ConditionFalse, "Lagging"},
	}
	for _, tt := range tests {
		r := record()
		r.Mirroring, r.MirroringSince = tt.state, since
		o := ToObject(&r)
		c := meta.FindStatusCondition(o.Status.Conditions, platform.ClusterCapacitySynced)
		if c == nil || c.Status != tt.status || c.Reason != tt.reason {
			t.Errorf("state %q: condition %+v, want %s %s", tt.state, c, tt.status, tt.reason)
		}
		if m := o.Status.Mirroring; string(m.State) != string(tt.state) || (tt.state != "") != (m.Since != nil && m.Since.Time.Equal(since)) {
			t.Errorf("state %q: mirroring %+v", tt.state, m)
		}
	}
}

func TestToObject(t *testing.T) {
	r := record()
	o := ToObject(&r)
	s := o.Status
	if o.Name != "prod-1" || o.ResourceVersion != "42" || o.Labels[platform.ClusterLabel] != "prod-1" || s.Cluster != "prod-1" {
		t.Errorf("metadata %+v, cluster %q", o.ObjectMeta, s.Cluster)
	}
	if !reflect.DeepEqual(s.Nodes, platform.NodeCounts{Total: 5, Ready: 4, Schedulable: 3, Cordoned: 1, Tainted: 1}) || s.Pods != 75 || s.Namespaces != 7 {
		t.Errorf("counts %+v pods %d namespaces %d", s.Nodes, s.Pods, s.Namespaces)
	}
	if a := s.Schedulable.Available; a.CPU.MilliValue() != 12000 || a.Memory.Value() != 192<<30 || a.Pods != 290 {
		t.Errorf("schedulable available %+v, want allocatable minus requested", a)
	}
	if u := s.Schedulable.Usage; u == nil || u.CPU.String() != "30500m" || u.Nodes != 2 {
		t.Errorf("schedulable usage %+v, want 30500m over 2 nodes", u)
	}
	if s.All.Usage != nil {
		t.Errorf("all usage %+v, want none: no node reports one", s.All.Usage)
	}
	if f := s.LargestFree; f == nil || f.CPU.MilliValue() != 6500 || f.Memory.Value() != 90<<30 {
		t.Errorf("largest free %+v", f)
	}
	tests := []struct {
		name   string
		change func(*store.ClusterCapacity)
		status metav1.ConditionStatus
		reason string
	}{
		{"room", func(*store.ClusterCapacity) {}, metav1.ConditionTrue, platform.ReasonRoomLeft},
		{"no schedulable node", func(c *store.ClusterCapacity) { c.HasRoom, c.NodesSchedulable, c.MaxFree = false, 0, nil }, metav1.ConditionFalse, platform.ReasonNoSchedulableNode},
		{"full", func(c *store.ClusterCapacity) { c.HasRoom, c.MaxFree = false, &store.Quantities{MemoryBytes: 1 << 30} }, metav1.ConditionFalse, platform.ReasonSchedulableFull},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := record()
			tt.change(&r)
			o := ToObject(&r)
			c := meta.FindStatusCondition(o.Status.Conditions, platform.ClusterCapacityHasRoom)
			if c == nil || c.Status != tt.status || c.Reason != tt.reason || !c.LastTransitionTime.Time.Equal(r.HasRoomSince) {
				t.Errorf("condition %+v, want %s %s since %s", c, tt.status, tt.reason, r.HasRoomSince)
			}
			if got, want := Kind.FieldValues(&o).Get("status.hasSchedulableCapacity"), strconv.FormatBool(tt.status == metav1.ConditionTrue); got != want {
				t.Errorf("field status.hasSchedulableCapacity = %q, want %q", got, want)
			}
		})
	}
}

// TestTable: the default columns read headroom on schedulable nodes with
// denominators, in cores.
func TestTable(t *testing.T) {
	if err := Kind.Validate(); err != nil {
		t.Fatal(err)
	}
	rest := NewREST(store.Source[store.ClusterCapacity]{Kind: store.KindClusterCapacity}, registry.WatchConfig{}, registry.MemberStaleness{})
	r := record()
	none := record()
	none.ClusterID, none.MaxFree, none.Schedulable = "empty", nil, store.CapacitySums{}
	list := &platform.ClusterCapacityList{Items: []platform.ClusterCapacity{ToObject(&r), ToObject(&none)}}
	r.Mirroring, r.MirroringSince = store.MemberSynced, time.Now().Add(-5*time.Minute)
	list.Items[0] = ToObject(&r)
	table, err := rest.ConvertToTable(context.Background(), list, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := [][]any{
		{"prod-1", "3/5", "12/64 (18%)", "192Gi/256Gi (75%)", "6500m, 90Gi", "40/330", "Synced (5m)"},
		{"empty", "3/5", "0/0", "0/0", "<none>", "0/0", "<unknown>"},
	}
	for i, row := range table.Rows {
		for j, w := range want[i] {
			if row.Cells[j] != w {
				t.Errorf("row %d column %s = %v, want %v", i, table.ColumnDefinitions[j].Name, row.Cells[j], w)
			}
		}
	}
	wide := 0
	for _, c := range table.ColumnDefinitions {
		if c.Priority == 1 {
			wide++
		}
	}
	if wide == 0 {
		t.Error("no -o wide columns")
	}
}

// TestJudgedByHeartbeatAge: a member is shown as its heartbeat's age says
// when it is read, whatever its recorded state: within the bound as
// recorded, past it Stale since the heartbeat crossed the bound, with its
// data age and the recorded state in the Synced condition; a member
// without a heartbeat, or a server that never judges, as recorded.
func TestJudgedByHeartbeatAge(t *testing.T) {
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	bound := registry.MemberStaleness{StaleAfter: 3 * time.Minute, Now: func() time.Time { return now }}
	tests := []struct {
		name      string
		staleness registry.MemberStaleness
		state     store.MemberState
		heartbeat time.Time
		want      platform.MirroringState
		wantAge   time.Duration
		wantCond  metav1.ConditionStatus
	}{
		{name: "fresh", staleness: bound, state: store.MemberSynced, heartbeat: now.Add(-2 * time.Minute),
			want: platform.MirroringSynced, wantCond: metav1.ConditionTrue},
		{name: "synced but its heartbeat is past the bound", staleness: bound, state: store.MemberSynced, heartbeat: now.Add(-250 * time.Second),
			want: platform.MirroringStale, wantAge: 250 * time.Second, wantCond: metav1.ConditionFalse},
		{name: "lagging and stale", staleness: bound, state: store.MemberLagging, heartbeat: now.Add(-time.Hour),
			want: platform.MirroringStale, wantAge: time.Hour, wantCond: metav1.ConditionFalse},
		{name: "no heartbeat yet", staleness: bound, state: store.MemberSyncing,
			want: platform.MirroringSyncing, wantCond: metav1.ConditionFalse},
		{name: "never judged", staleness: registry.MemberStaleness{Now: bound.Now}, state: store.MemberSynced, heartbeat: now.Add(-time.Hour),
			want: platform.MirroringSynced, wantCond: metav1.ConditionTrue},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := record()
			r.Mirroring, r.MirroringSince, r.CompleteAsOf = tc.state, now.Add(-time.Hour), tc.heartbeat
			got := Judged(tc.staleness)(&r)
			m := got.Status.Mirroring
			if m.State != tc.want {
				t.Errorf("state %q, want %q", m.State, tc.want)
			}
			var age time.Duration
			if m.DataAge != nil {
				age = m.DataAge.Duration
			}
			if age != tc.wantAge {
				t.Errorf("data age %s, want %s", age, tc.wantAge)
			}
			if !tc.heartbeat.IsZero() && (m.CompleteAsOf == nil || !m.CompleteAsOf.Time.Equal(tc.heartbeat)) {
				t.Errorf("completeAsOf %v, want %s", m.CompleteAsOf, tc.heartbeat)
			}
			c := meta.FindStatusCondition(got.Status.Conditions, platform.ClusterCapacitySynced)
			if c == nil || c.Status != tc.wantCond {
				t.Fatalf("Synced condition %+v, want status %s", c, tc.wantCond)
			}
			if tc.want == platform.MirroringStale {
				if !m.Since.Time.Equal(tc.heartbeat.Add(3*time.Minute)) || c.Reason != "Stale" ||
					!strings.Contains(c.Message, "last recorded the member "+string(tc.state)) {
					t.Errorf("since %s, condition %s: %q; want since the heartbeat plus the bound, reason Stale naming the recorded state", m.Since, c.Reason, c.Message)
				}
			}
		})
	}
}
