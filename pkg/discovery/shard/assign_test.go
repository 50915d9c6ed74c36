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
// one whatever the counts and whoever holds what now.
func TestAssignIsFair(t *testing.T) {
	for _, tc := range []struct{ members, replicas int }{{6, 3}, {20, 3}, {1, 3}, {0, 2}, {7, 1}, {50, 7}} {
		members, replicas := ids("m", tc.members), ids("r", tc.replicas)
		// Nobody holds anything; one replica holds everything.
		all := map[string]string{}
		for _, m := range members {
			all[m] = replicas[0]
		}
		for _, holders := range []map[string]string{nil, all} {
			got := Assign(members, replicas, holders)
			if len(got) != tc.members {
				t.Errorf("%d members on %d replicas: %d assigned", tc.members, tc.replicas, len(got))
			}
			load := map[string]int{}
			for _, r := range got {
				load[r]++
			}
			for _, r := range replicas {
				if n := load[r]; n < tc.members/tc.replicas || n > (tc.members+tc.replicas-1)/tc.replicas {
					t.Errorf("%d members on %d replicas (held by %d): %s has %d, want %d or %d", tc.members, tc.replicas, len(holders), r, n,
						tc.members/tc.replicas, (tc.members+tc.replicas-1)/tc.replicas)
				}
			}
		}
	}
	if Assign(ids("m", 3), nil, nil) != nil {
		t.Error("assignment without replicas, want nil")
	}
}

// TestAssignIsDeterministic: order and duplicates of the inputs do not
// matter, so replicas agree.
func TestAssignIsDeterministic(t *testing.T) {
	held := map[string]string{"a": "r2", "b": "r2", "c": "r2"}
	a := Assign([]string{"b", "a", "c", "d"}, []string{"r2", "r1"}, held)
	b := Assign([]string{"d", "c", "a", "b", "a"}, []string{"r1", "r2", "r1"}, held)
	if fmt.Sprint(a) != fmt.Sprint(b) {
		t.Errorf("assignments differ: %v vs %v", a, b)
	}
}

// TestAssignMovesFew: a settled fleet moves nothing; when a replica leaves
// only its members move, and when one joins only its share moves to it.
func TestAssignMovesFew(t *testing.T) {
	members := ids("m", 30)
	settled := Assign(members, ids("r", 3), nil)
	if again := Assign(members, ids("r", 3), settled); fmt.Sprint(again) != fmt.Sprint(settled) {
		t.Errorf("a settled fleet: assignment changed from %v to %v", settled, again)
	}

	left := Assign(members, ids("r", 2), settled)
	for m, r := range settled {
		if r != "r-02" && left[m] != r {
			t.Errorf("r-02 left: %s moved from %s to %s", m, r, left[m])
		}
	}

	joined := Assign(members, ids("r", 4), settled)
	moved := 0
	for m, r := range settled {
		if joined[m] != r {
			moved++
			if joined[m] != "r-03" {
				t.Errorf("r-03 joined: %s moved from %s to %s, not to the new replica", m, r, joined[m])
			}
		}
	}
	if moved != 7 {
		t.Errorf("r-03 joined: %d members moved, want its share (7 of 30)", moved)
	}

	// A holder that is not a replica any more (dead) holds nothing.
	dead := map[string]string{}
	for _, m := range members {
		dead[m] = "gone"
	}
	if got, want := Assign(members, ids("r", 3), dead), Assign(members, ids("r", 3), nil); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("members held by a dead replica: %v, want as if free %v", got, want)
	}
}
