package usagereport

import (
	"fmt"
	"math"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/example/platform-apiserver/pkg/apis/platform"
	"github.com/example/platform-apiserver/pkg/registry/clustercapacity"
	"github.com/example/platform-apiserver/pkg/registry/store"
)

// validateRecommend says what is wrong with spec.recommend: it sizes one
// namespace's requests, from a percentile of 50–100 plus a headroom of
// 0–100 %.
func validateRecommend(path *field.Path, spec *platform.UsageReportSpec) field.ErrorList {
	r := spec.Recommend
	if r == nil {
		return nil
	}
	var errs field.ErrorList
	if spec.Namespace == "" {
		errs = append(errs, field.Required(field.NewPath("spec", "namespace"),
			"spec.recommend sizes one namespace's requests: name it (or ask with a LocalUsageReport in it)"))
	}
	if p := r.Percentile; p != 0 && (p < 50 || p > 100) {
		errs = append(errs, field.Invalid(path.Child("percentile"), p, "must be 50–100 (or unset: 95)"))
	}
	if h := r.HeadroomPercent; h != nil && (*h < 0 || *h > 100) {
		errs = append(errs, field.Invalid(path.Child("headroomPercent"), *h, "must be 0–100 (or unset: 15)"))
	}
	return errs
}

func percentile(r *platform.RecommendOptions) int32 {
	if r.Percentile == 0 {
		return platform.DefaultRecommendPercentile
	}
	return r.Percentile
}

func headroom(r *platform.RecommendOptions) int32 {
	if r.HeadroomPercent == nil {
		return platform.DefaultRecommendHeadroomPercent
	}
	return *r.HeadroomPercent
}

// recommendation is the answer to opts from the sized requests and the
// namespace as it is now.
func recommendation(opts *platform.RecommendOptions, rec *store.UsageRecommendation, ns *store.ClusterNamespace) *platform.UsageRecommendation {
	out := &platform.UsageRecommendation{
		Percentile: percentile(opts), HeadroomPercent: headroom(opts),
		Requests: amounts(rec.Requests), Quota: amounts(rec.Quota),
		Covered: platform.CoveredShares{CPU: share(rec.CPUCovered), Memory: share(rec.MemoryCovered)},
	}
	cur := currentRequests(ns)
	out.CurrentRequests = amounts(cur)
	out.Frees = amounts(store.UsageAmounts{CPU: cur.CPU - rec.Requests.CPU, Memory: cur.Memory - rec.Requests.Memory})
	if q, ok := currentQuota(ns.Quotas); ok {
		out.CurrentQuota = new(amounts(q))
	}
	return out
}

// currentRequests are the namespace's pods' requests, CPU in nanocores.
func currentRequests(ns *store.ClusterNamespace) store.UsageAmounts {
	return store.UsageAmounts{CPU: ns.Requested.CPUMillis * 1_000_000, Memory: ns.Requested.MemoryBytes}
}

// currentQuota is what the namespace's quotas promise on requests.cpu
// (or cpu) and requests.memory (or memory), as ClusterCapacity counts it
// (clustercapacity.NamespaceCommitment): the least hard among its quotas
// without scopes, since a pod must fit every quota that matches it. A
// resource none of them limits is 0; ok is false when neither is.
func currentQuota(quotas []store.Quota) (q store.UsageAmounts, ok bool) {
	c := clustercapacity.NamespaceCommitment(clustercapacity.QuotasOf(quotas))
	cpu, hasCPU := c.Hard["requests.cpu"]
	mem, hasMem := c.Hard["requests.memory"]
	return store.UsageAmounts{CPU: cpu.ScaledValue(resource.Nano), Memory: mem.Value()}, hasCPU || hasMem
}

// amounts are a's CPU in millicores (every amount here is whole
// millicores) and its memory in bytes, exactly.
func amounts(a store.UsageAmounts) platform.RecommendedAmounts {
	return platform.RecommendedAmounts{CPU: *resource.NewMilliQuantity(a.CPU/1_000_000, resource.DecimalSI),
		Memory: *resource.NewQuantity(a.Memory, resource.BinarySI)}
}

// share prints a share (0–1) as a percentage with one decimal, rounded
// down, so that 99.96 % is not shown as all of them.
func share(f float64) string {
	return fmt.Sprintf("%.1f%%", math.Floor(f*1000)/10)
}
