package registry

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestDataAgeColumn: the column shows a member's data age where it is past
// the bound, nothing for a fresh member, an unknown one or heartbeats that
// cannot be read, and reads the heartbeats once per heartbeatsTTL.
func TestDataAgeColumn(t *testing.T) {
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	loads := 0
	fail := false
	h := &MemberHeartbeats{
		Load: func(context.Context) (map[string]time.Time, error) {
			loads++
			if fail {
				return nil, errors.New("registry down")
			}
			return map[string]time.Time{"stale": now.Add(-4 * time.Minute), "fresh": now.Add(-time.Minute)}, nil
		},
		Staleness: MemberStaleness{StaleAfter: 3 * time.Minute, Now: func() time.Time { return now }},
	}
	type object struct{ cluster string }
	col := DataAgeColumn(h, func(o *object) string { return o.cluster })
	for cluster, want := range map[string]string{"stale": "4m0s", "fresh": None, "unknown": None} {
		if got := col.Cell(&object{cluster}); got != want {
			t.Errorf("%s: %v, want %v", cluster, got, want)
		}
	}
	if loads != 1 {
		t.Errorf("%d reads of the heartbeats for three cells, want 1", loads)
	}
	fail, h.readAt = true, time.Time{}
	if got := col.Cell(&object{"stale"}); got != "4m0s" {
		t.Errorf("after a failed read: %v, want the last heartbeats' answer 4m0s", got)
	}
	if col.Priority != 1 {
		t.Errorf("priority %d, want 1 (-o wide)", col.Priority)
	}
}

// TestWithDataAge: with heartbeats, a copy of the kind ends its table with
// the data age and the kind itself is left as it was; without, the kind.
func TestWithDataAge(t *testing.T) {
	type object struct{ cluster string }
	k := &Kind[struct{}, object]{Columns: []Column[object]{{Name: "Name"}}}
	if got := WithDataAge(k, nil, func(o *object) string { return o.cluster }); got != k {
		t.Errorf("without heartbeats: %p, want the kind itself %p", got, k)
	}
	got := WithDataAge(k, &MemberHeartbeats{}, func(o *object) string { return o.cluster })
	if len(got.Columns) != 2 || got.Columns[1].Name != "Member Data Age" || len(k.Columns) != 1 {
		t.Errorf("columns %v (the kind's own %v), want Name then Member Data Age, the kind's own unchanged", got.Columns, k.Columns)
	}
}
