// Package shard shares member clusters among the replicas that run
// discovery: one Lease per member in the hosting cluster, held by the
// replica that mirrors it, and a presence Lease per replica, from which
// every replica computes the same fair assignment.
package shard

import (
	"cmp"
	"crypto/sha256"
	"encoding/binary"
	"slices"
)

// Assign maps each member to one of the replicas: every replica gets at
// most ceil(members/replicas) and members go to the replica that ranks
// highest for them (rendezvous hashing) among those with room. It depends
// only on its inputs (as sets), so replicas that see the same members and
// replicas compute the same assignment, and a replica joining or leaving
// moves few members. It returns nil without replicas.
func Assign(members, replicas []string) map[string]string {
	if len(replicas) == 0 {
		return nil
	}
	members = slices.Compact(slices.Sorted(slices.Values(members)))
	replicas = slices.Compact(slices.Sorted(slices.Values(replicas)))
	limit := (len(members) + len(replicas) - 1) / len(replicas)
	load := make(map[string]int, len(replicas))
	out := make(map[string]string, len(members))
	ranked := make([]string, len(replicas))
	for _, m := range members {
		copy(ranked, replicas)
		slices.SortFunc(ranked, func(a, b string) int {
			return cmp.Or(cmp.Compare(score(m, b), score(m, a)), cmp.Compare(a, b))
		})
		for _, r := range ranked {
			if load[r] < limit {
				out[m] = r
				load[r]++
				break
			}
		}
	}
	return out
}

// score is the rendezvous weight of a (member, replica) pair.
func score(member, replica string) uint64 {
	h := sha256.Sum256([]byte(member + "\x00" + replica))
	return binary.BigEndian.Uint64(h[:8])
}
