package quotareport

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/example/platform-apiserver/pkg/apis/platform"
	"github.com/example/platform-apiserver/pkg/registry/clustercapacity"
	"github.com/example/platform-apiserver/pkg/registry/store"
	"github.com/example/platform-apiserver/pkg/units"
)

// Policy bounds what a member's quotas may commit: per quota resource
// (requests.cpu), the most in percent of the schedulable allocatable of
// the resource it limits (--quota-max-overcommit). A resource it does not
// name is bounded at DefaultMaxPercent when it is pods or requests.<r>
// (no overcommit of what the scheduler counts) and unbounded when it is
// limits.<r>. One policy holds for every member: members carry no labels
// yet (cluster_capacity.labels is always empty) to set their own.
type Policy map[string]int64

// DefaultMaxPercent bounds requests and pods by default: no overcommit.
const DefaultMaxPercent = 100

// ValidatePolicy says what is wrong with a policy's resources and bounds.
func ValidatePolicy(p Policy) []error {
	var errs []error
	for _, r := range slices.Sorted(maps.Keys(p)) {
		if c, ok := clustercapacity.CommittedResource(r); !ok || c != r {
			errs = append(errs, fmt.Errorf("--quota-max-overcommit: %q is not a resource quotas limit on pods; name pods, requests.<resource> or limits.<resource> (requests.cpu, not cpu)", r))
		}
		if b := p[r]; b < 1 || b > 100_000 {
			errs = append(errs, fmt.Errorf("--quota-max-overcommit: %s=%d: a bound is a percent of the allocatable from 1 to 100000 (150 allows committing 1.5 times it)", r, b))
		}
	}
	return errs
}

// bound is the policy's bound of resource r.
func (p Policy) bound(r string) (int64, bool) {
	if b, ok := p[r]; ok {
		return b, true
	}
	if r == "pods" || strings.HasPrefix(r, "requests.") {
		return DefaultMaxPercent, true
	}
	return 0, false
}

// judge answers for one member: the proposal in place of what the
// namespace's quotas promise there now (ns is nil where the member has no
// such namespace), against the member's committed quota, allocatable and
// the policy.
func (a *answerer) judge(cc *store.ClusterCapacity, ns *store.ClusterNamespace, proposed map[string]resource.Quantity) platform.QuotaClusterAnswer {
	fresh := a.staleness.Judge(cc.Mirroring, cc.MirroringSince, cc.CompleteAsOf)
	c := platform.QuotaClusterAnswer{Cluster: cc.ClusterID, Verdict: platform.QuotaFits,
		Mirroring: fresh.Mirroring, Stale: fresh.Stale, DataAge: fresh.DataAge}
	var current clustercapacity.Commitment
	if ns != nil {
		current = clustercapacity.NamespaceCommitment(clustercapacity.QuotasOf(ns.Quotas))
	}
	var over []string
	for _, r := range slices.Sorted(maps.Keys(proposed)) {
		ans := platform.QuotaResourceAnswer{Name: r, Proposed: proposed[r]}
		before := clustercapacity.Amount(r, cc.Committed.Hard[r])
		after := before.DeepCopy()
		if cur, ok := current.Hard[r]; ok {
			ans.Current = &cur
			after.Sub(cur)
		}
		after.Add(proposed[r])
		ans.CommittedBefore, ans.CommittedAfter = before, after
		bound, bounded := a.policy.bound(r)
		if bounded {
			ans.MaxPercent = &bound
		}
		alloc, ok := clustercapacity.NodeAmount(r, cc.Schedulable.Allocatable)
		ans.Fits = !bounded
		if ok && alloc.Sign() > 0 {
			requested, _ := clustercapacity.NodeAmount(r, cc.Schedulable.Requested)
			pct := clustercapacity.Percent(after, alloc, true)
			ans.Allocatable, ans.Requested, ans.PercentAfter = &alloc, &requested, &pct
			ans.Fits = !bounded || pct <= bound
		}
		if !ans.Fits && ans.PercentAfter == nil {
			over = append(over, fmt.Sprintf("%s: no schedulable node has %s", r, clustercapacity.LimitedResource(r)))
		} else if !ans.Fits {
			over = append(over, fmt.Sprintf("%s: %d%% of the schedulable allocatable after, more than %d%%", r, *ans.PercentAfter, bound))
		}
		c.Resources = append(c.Resources, ans)
	}
	if len(over) > 0 {
		c.Verdict, c.Reason = platform.QuotaExceedsPolicy, strings.Join(over, "; ")
	}
	return c
}

// tightest is the largest share of allocatable a member's answer commits.
func tightest(c platform.QuotaClusterAnswer) int64 {
	var most int64
	for _, r := range c.Resources {
		if r.PercentAfter != nil {
			most = max(most, *r.PercentAfter)
		}
	}
	return most
}

// sortBest orders members best first: the quota fits before it does not,
// current data before stale, then the most room left (the lowest tightest
// share), then by name.
func sortBest(cs []platform.QuotaClusterAnswer) {
	slices.SortStableFunc(cs, func(a, b platform.QuotaClusterAnswer) int {
		if (a.Verdict == platform.QuotaFits) != (b.Verdict == platform.QuotaFits) {
			if a.Verdict == platform.QuotaFits {
				return -1
			}
			return 1
		}
		if a.Stale != b.Stale {
			if a.Stale {
				return 1
			}
			return -1
		}
		if c := cmp.Compare(tightest(a), tightest(b)); c != 0 {
			return c
		}
		return cmp.Compare(a.Cluster, b.Cluster)
	})
}

// usageP95 is the namespace's 95th percentile usage in kubectl top's units.
func usageP95(h *store.UsageHistory) *platform.RecommendedAmounts {
	return &platform.RecommendedAmounts{CPU: units.CPU(h.CPU.P95), Memory: units.Memory(h.Memory.P95)}
}
