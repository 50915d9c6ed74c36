package shard

import (
	"fmt"
	"testing"
)

func ids(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%02d", prefix, i)
	}
	return out
}

// TestAssignIsFair: every member gets a replica, and loads differ by at most
// one whatever the counts.
func TestAssignIsFair(t *testing.T) {
	for _, tc := range []struct{ members, replicas int }{{6, 3}, {20, 3}, {1, 3}, {0, 2}, {7, 1}, {50, 7}} {
		got := Assign(ids("m", tc.members), ids("r", tc.replicas))
		if len(got) != tc.members {
			t.Errorf("%d members on %d replicas: %d assigned", tc.members, tc.replicas, len(got))
		}
		load := map[string]int{}
		for _, r := range got {
			load[r]++
		}
		limit := (tc.members + tc.replicas - 1) / tc.replicas
		for r, n := range load {
			if n > limit {
				t.Errorf("%d members on %d replicas: %s has %d, limit %d", tc.members, tc.replicas, r, n, limit)
			}
		}
		if tc.members >= tc.replicas && len(load) != tc.replicas {
			t.Errorf("%d members on %d replicas: only %d replicas got members: %v", tc.members, tc.replicas, len(load), load)
		}
	}
	if Assign(ids("m", 3), nil) != nil {
		t.Error("assignment without replicas, want nil")
	}
}

// TestAssignIsDeterministic: order and duplicates of the inputs do not
// matter, so replicas agree.
func TestAssignIsDeterministic(t *testing.T) {
	a := Assign([]string{"b", "a", "c", "d"}, []string{"r2", "r1"})
	b := Assign([]string{"d", "c", "a", "b", "a"}, []string{"r1", "r2", "r1"})
	if fmt.Sprint(a) != fmt.Sprint(b) {
		t.Errorf("assignments differ: %v vs %v", a, b)
	}
}

// TestAssignMovesFew: when a replica leaves, the members of the others
// mostly stay where they are; when one joins, it takes about its share.
func TestAssignMovesFew(t *testing.T) {
	members := ids("m", 30)
	before := Assign(members, ids("r", 3))
	after := Assign(members, ids("r", 2))
	moved := 0
	for m, r := range before {
		if r != "r-02" && after[m] != r {
			moved++
		}
	}
	// r-02's 10 members must move; the survivors' may shuffle a little to
	// make room under the load limit (15 each), never wholesale.
	if moved > 6 {
		t.Errorf("a replica left: %d members of the surviving replicas moved, want few", moved)
	}
	grown := Assign(members, ids("r", 4))
	changed := 0
	for m, r := range before {
		if grown[m] != r {
			changed++
		}
	}
	if changed > 12 {
		t.Errorf("a replica joined: %d members moved, want about its share (8)", changed)
	}
}
