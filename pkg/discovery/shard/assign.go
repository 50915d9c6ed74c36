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

// Assign maps each member to one of the replicas, given which replica holds
// which member now (holders; entries for unknown members or replicas are
// ignored). Loads differ by at most one: every replica gets
// members/replicas, and the members%replicas replicas that hold the most
// now get one more. A replica keeps the members it holds up to that share
// (those that rank highest for it), so a settled fleet moves nothing; the
// other members go, in order, to the replica that ranks highest for them
// (rendezvous hashing) among those with room, so a replica joining or
// leaving moves only its share. Assign depends only on its inputs (as
// sets), so replicas that see the same Leases agree. It returns nil
// without replicas.
func Assign(members, replicas []string, holders map[string]string) map[string]string {
	if len(replicas) == 0 {
		return nil
	}
	members = slices.Compact(slices.Sorted(slices.Values(members)))
	replicas = slices.Compact(slices.Sorted(slices.Values(replicas)))

	held := make(map[string][]string, len(replicas))
	for _, r := range replicas {
		held[r] = nil
	}
	for _, m := range members {
		if r, ok := holders[m]; ok {
			if _, known := held[r]; known {
				held[r] = append(held[r], m)
			}
		}
	}
	// Shares: the replicas holding the most get the remainder's extra one.
	byHeld := slices.Clone(replicas)
	slices.SortStableFunc(byHeld, func(a, b string) int { return cmp.Compare(len(held[b]), len(held[a])) })
	share := make(map[string]int, len(replicas))
	for i, r := range byHeld {
		share[r] = len(members) / len(replicas)
		if i < len(members)%len(replicas) {
			share[r]++
		}
	}

	out := make(map[string]string, len(members))
	load := make(map[string]int, len(replicas))
	for _, r := range replicas {
		mine := held[r]
		slices.SortFunc(mine, func(a, b string) int { return cmp.Or(cmp.Compare(score(b, r), score(a, r)), cmp.Compare(a, b)) })
		for _, m := range mine[:min(len(mine), share[r])] {
			out[m] = r
			load[r]++
		}
	}
	ranked := make([]string, len(replicas))
	for _, m := range members {
		if _, kept := out[m]; kept {
			continue
		}
		copy(ranked, replicas)
		slices.SortFunc(ranked, func(a, b string) int {
			return cmp.Or(cmp.Compare(score(m, b), score(m, a)), cmp.Compare(a, b))
		})
		for _, r := range ranked {
			if load[r] < share[r] {
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
