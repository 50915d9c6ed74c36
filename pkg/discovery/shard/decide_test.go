package shard

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestDecide: one round's steps from the Leases as observed, for each
// situation a replica meets.
func TestDecide(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	const d = 10 * time.Second
	// lease is a Lease last seen changing ago before now.
	type lease struct {
		name, role, cluster, holder string
		ago                         time.Duration
		dur                         time.Duration // the duration it says: d if 0
	}
	member := func(cluster, holder string, ago time.Duration) lease {
		return lease{MemberLeaseName("discovery", cluster), RoleMember, cluster, holder, ago, 0}
	}
	// held is a member Lease as a manager writes it: for a long
	// duration (Config.MemberLeaseDuration), kept by its holder's presence.
	held := func(cluster, holder string, ago time.Duration) lease {
		l := member(cluster, holder, ago)
		l.dur = defaultMemberLeases * d
		return l
	}
	replica := func(identity string, ago time.Duration) lease {
		return lease{ReplicaLeaseName("discovery", identity), RoleReplica, "", identity, ago, 0}
	}
	for _, tc := range []struct {
		name        string
		members     []string
		leases      []lease
		held, lost  []string
		mayTakeOver bool
		want        []string // "<verb> <id>", in order
	}{
		{name: "alone, no Leases yet: create every member's",
			members: []string{"a", "b"},
			want:    []string{"create a", "create b"}},
		{name: "alone, holding everything: renew",
			members: []string{"a", "b"}, held: []string{"a", "b"},
			leases: []lease{member("a", "r1", time.Second), member("b", "r1", time.Second)},
			want:   []string{"renew a", "renew b"}},
		{name: "a free Lease assigned here is acquired",
			members: []string{"a"}, leases: []lease{member("a", "", time.Second)},
			want: []string{"acquire a"}},
		{name: "a Lease left as ours (a renewal's answer lost) is taken back",
			members: []string{"a"}, leases: []lease{member("a", "r1", time.Second)},
			want: []string{"acquire a"}},
		{name: "another replica took a held member's Lease: stop",
			members: []string{"a"}, held: []string{"a"},
			leases: []lease{member("a", "r2", time.Second), replica("r2", time.Second)},
			want:   []string{"stop a"}},
		{name: "a replica joined: the held member assigned to it is handed over",
			members: []string{"a", "b"}, held: []string{"a", "b"},
			leases: []lease{member("a", "r1", time.Second), member("b", "r1", time.Second), replica("r2", time.Second)},
			want:   joinSteps("a", "b", "r1", "r2")},
		{name: "a dead replica's expired Lease: taken only once this replica's writes work",
			members: []string{"a"}, leases: []lease{member("a", "r2", 2*d), replica("r2", 2*d)},
			want: nil},
		{name: "a dead replica's expired Lease, writes working: acquired",
			members: []string{"a"}, leases: []lease{member("a", "r2", 2*d), replica("r2", 2*d)}, mayTakeOver: true,
			want: []string{"acquire a"}},
		{name: "a live replica's Lease is left alone",
			members: []string{"a"}, leases: []lease{member("a", "r2", time.Second), replica("r2", time.Second)}, mayTakeOver: true,
			want: nil},
		{name: "a member Lease unwritten for longer than a presence lasts is its holder's while its presence is renewed",
			members: []string{"a"}, leases: []lease{held("a", "r2", 5*d), replica("r2", time.Second)}, mayTakeOver: true,
			want: nil},
		{name: "a member Lease of a replica whose presence expired is taken over, however long the member Lease says",
			members: []string{"a"}, leases: []lease{held("a", "r2", 2*d), replica("r2", 2*d)}, mayTakeOver: true,
			want: []string{"acquire a"}},
		{name: "a member Lease of a replica without a presence Lease is taken over after a lease duration",
			members: []string{"a"}, leases: []lease{held("a", "r2", 2*d)}, mayTakeOver: true,
			want: []string{"acquire a"}},
		{name: "a member Lease not renewed for its own duration stays with its live holder while the assignment says so",
			members: []string{"a"}, leases: []lease{held("a", "r2", defaultMemberLeases*d+time.Second), replica("r2", time.Second)}, mayTakeOver: true,
			want: nil},
		{name: "a member Lease not renewed for two of its own durations is taken over though its holder lives (stuck on it)",
			members: []string{"a"}, leases: []lease{held("a", "r2", 2*defaultMemberLeases*d+time.Second), replica("r2", time.Second)}, mayTakeOver: true,
			want: []string{"acquire a"}},
		{name: "a lost member is given up and not taken again in the round",
			members: []string{"a"}, held: []string{"a"}, lost: []string{"a"},
			leases: []lease{member("a", "r1", time.Second)},
			want:   []string{"give up a"}},
		{name: "a member no longer configured is given up",
			members: []string{"a"}, held: []string{"a", "gone"},
			leases: []lease{member("a", "r1", time.Second), member("gone", "r1", time.Second)},
			want:   []string{"renew a", "give up gone"}},
		{name: "stale Leases of unconfigured members and gone replicas are collected, configured ones kept",
			members: []string{"a"},
			leases:  []lease{member("a", "", 11*d), member("gone", "", 11*d), replica("r9", 11*d)}, mayTakeOver: true,
			want: []string{"acquire a", "collect " + MemberLeaseName("discovery", "gone"), "collect " + ReplicaLeaseName("discovery", "r9")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := round{self: "r1", set: "discovery", now: now, leaseDuration: d, mayTakeOver: tc.mayTakeOver,
				members: tc.members, leases: map[string]*coordinationv1.Lease{}, observed: map[string]observation{},
				held: set(tc.held), lost: set(tc.lost)}
			for _, l := range tc.leases {
				dur := cmp.Or(l.dur, d)
				spec := coordinationv1.LeaseSpec{LeaseDurationSeconds: new(int32(dur / time.Second))}
				if l.holder != "" {
					spec.HolderIdentity = new(l.holder)
				}
				labels := map[string]string{LabelSet: "discovery", LabelRole: l.role}
				if l.cluster != "" {
					labels[LabelCluster] = l.cluster
				}
				r.leases[l.name] = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: l.name, Labels: labels}, Spec: spec}
				r.observed[l.name] = observation{at: now.Add(-l.ago)}
			}
			var got []string
			for _, s := range decide(r) {
				got = append(got, string(s.verb)+" "+s.id)
			}
			// Collections come from a map: compare them as a set.
			sortCollects := func(steps []string) []string {
				i := slices.IndexFunc(steps, func(s string) bool { return strings.HasPrefix(s, "collect ") })
				if i >= 0 {
					slices.Sort(steps[i:])
				}
				return steps
			}
			if got, want := sortCollects(got), sortCollects(slices.Clone(tc.want)); !slices.Equal(got, want) {
				t.Errorf("steps %q, want %q", got, want)
			}
		})
	}
}

func set(ids []string) map[string]bool {
	out := map[string]bool{}
	for _, id := range ids {
		out[id] = true
	}
	return out
}

// joinSteps are the steps of from, holding members a and b, when
// replica to joins: Assign gives one to each; from hands that one over
// and renews the other, in the members' order.
func joinSteps(a, b, from, to string) []string {
	assigned := Assign([]string{a, b}, []string{from, to}, map[string]string{a: from, b: from})
	var steps []string
	for _, m := range []string{a, b} {
		if assigned[m] == to {
			steps = append(steps, "give up "+m)
		} else {
			steps = append(steps, "renew "+m)
		}
	}
	if len(slices.Compact(slices.Sorted(maps.Values(assigned)))) != 2 {
		panic(fmt.Sprintf("Assign did not share: %v", assigned))
	}
	return steps
}
