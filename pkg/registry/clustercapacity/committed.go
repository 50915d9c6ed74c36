package clustercapacity

import (
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
)

// The committed quota rule in Go: what the registry computes in SQL
// (registry_quota_commitment, summed by cluster_capacity_add_namespaces),
// written again from the rule as docs/clustercapacity.md states it, for the
// tests to hold the registry to (the registry's sums are never computed
// here; the API shows the registry's).

// Quota is what the rule reads of one ResourceQuota.
type Quota struct {
	Name       string
	Hard, Used map[string]resource.Quantity
	// Scoped: the quota has scopes (spec.scopes or spec.scopeSelector).
	Scoped bool
}

// Commitment is a committed quota: per resource, the sums of the
// namespaces' promises counted in Hard and Used (an unscoped quota bounds
// the namespace) or in ScopedHard and ScopedUsed (only quotas with scopes
// do). Zero sums are left out, as the registry leaves them out.
type Commitment struct {
	Hard, Used, ScopedHard, ScopedUsed map[string]resource.Quantity
}

// CommittedResource is the resource a quota's resource name commits, as
// quota admission's pod evaluator counts it, and whether it is one: pods,
// requests.<r> but requests.storage (a PersistentVolumeClaim's), limits.<r>,
// and cpu, memory and ephemeral-storage as requests.<them>.
func CommittedResource(name string) (string, bool) {
	switch {
	case name == "cpu" || name == "memory" || name == "ephemeral-storage":
		return "requests." + name, true
	case name == "pods", strings.HasPrefix(name, "limits."):
		return name, true
	case strings.HasPrefix(name, "requests."):
		return name, name != "requests.storage"
	}
	return "", false
}

// NamespaceCommitment is what one namespace's quotas promise: per resource,
// the least hard among its quotas without scopes (the first by name among
// equal ones) and that quota's used, else the sums of its quotas with
// scopes. Within a quota a resource named twice (cpu and requests.cpu) is
// bounded by the lesser hard (the first name among equal ones).
func NamespaceCommitment(quotas []Quota) Commitment {
	type bound struct {
		quota      string
		hard, used resource.Quantity
	}
	unscoped := map[string]bound{}
	scoped := map[string][]bound{}
	ordered := append([]Quota(nil), quotas...)
	sort.SliceStable(ordered, func(i, j int) bool { return ordered[i].Name < ordered[j].Name })
	for _, q := range ordered {
		names := make([]string, 0, len(q.Hard))
		for name := range q.Hard {
			names = append(names, name)
		}
		sort.Strings(names)
		own := map[string]bound{}
		for _, name := range names {
			r, ok := CommittedResource(name)
			if !ok {
				continue
			}
			b := bound{quota: q.Name, hard: q.Hard[name], used: q.Used[name]}
			if have, seen := own[r]; !seen || b.hard.Cmp(have.hard) < 0 {
				own[r] = b
			}
		}
		for r, b := range own {
			switch {
			case q.Scoped:
				scoped[r] = append(scoped[r], b)
			default:
				if have, seen := unscoped[r]; !seen || b.hard.Cmp(have.hard) < 0 {
					unscoped[r] = b
				}
			}
		}
	}
	var c Commitment
	for r, b := range unscoped {
		add(&c.Hard, r, b.hard)
		add(&c.Used, r, b.used)
	}
	for r, bs := range scoped {
		if _, bounded := unscoped[r]; bounded {
			continue
		}
		for _, b := range bs {
			add(&c.ScopedHard, r, b.hard)
			add(&c.ScopedUsed, r, b.used)
		}
	}
	return c
}

// MemberCommitment sums the namespaces' commitments.
func MemberCommitment(namespaces [][]Quota) Commitment {
	var c Commitment
	for _, quotas := range namespaces {
		n := NamespaceCommitment(quotas)
		for _, m := range []struct{ into, from *map[string]resource.Quantity }{
			{&c.Hard, &n.Hard}, {&c.Used, &n.Used}, {&c.ScopedHard, &n.ScopedHard}, {&c.ScopedUsed, &n.ScopedUsed},
		} {
			for r, q := range *m.from {
				add(m.into, r, q)
			}
		}
	}
	return c
}

// add adds q to (*sums)[r], leaving zero sums out and an empty map nil.
func add(sums *map[string]resource.Quantity, r string, q resource.Quantity) {
	if *sums == nil {
		*sums = map[string]resource.Quantity{}
	}
	sum := (*sums)[r]
	sum.Add(q)
	if sum.IsZero() {
		delete(*sums, r)
	} else {
		(*sums)[r] = sum
	}
	if len(*sums) == 0 {
		*sums = nil
	}
}

// Equal reports whether two commitments hold the same amounts (compared as
// quantities, whatever their formats).
func (c Commitment) Equal(o Commitment) bool {
	return equalAmounts(c.Hard, o.Hard) && equalAmounts(c.Used, o.Used) &&
		equalAmounts(c.ScopedHard, o.ScopedHard) && equalAmounts(c.ScopedUsed, o.ScopedUsed)
}

func equalAmounts(a, b map[string]resource.Quantity) bool {
	if len(a) != len(b) {
		return false
	}
	for r, q := range a {
		if p, ok := b[r]; !ok || q.Cmp(p) != 0 {
			return false
		}
	}
	return true
}
