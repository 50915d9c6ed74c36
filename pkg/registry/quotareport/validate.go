package quotareport

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/example/platform-apiserver/pkg/apis/platform"
	"github.com/example/platform-apiserver/pkg/registry"
	"github.com/example/platform-apiserver/pkg/registry/clustercapacity"
)

// maxAmount bounds a proposed hard limit in the resource's base unit
// (cores, bytes, pods): 2^53, 8 PiB of memory or 9·10^15 cores, past any
// member's allocatable, where float64 and JSON numbers stay exact.
var maxAmount = resource.NewQuantity(1<<53, resource.DecimalSI)

// validate says what is wrong with spec, each problem with how to fix it.
func (a *answerer) validate(spec *platform.QuotaReportSpec) field.ErrorList {
	path := field.NewPath("spec")
	l := a.limits.WithDefaults()
	var errs field.ErrorList
	if n := len(spec.Hard); n > l.QueryResources {
		errs = append(errs, registry.TooMany(path.Child("hard"), n, l.QueryResources, "--max-query-resources"))
	}
	if n := len(spec.Clusters); n > l.QueryClusters {
		errs = append(errs, registry.TooMany(path.Child("clusters"), n, l.QueryClusters, "--max-query-clusters"))
	}
	if len(errs) > 0 {
		return errs // nothing more to say about a question that large
	}
	errs = append(errs, registry.ValidateText(path.Child("namespace"), spec.Namespace)...)
	for _, c := range spec.Clusters {
		errs = append(errs, registry.ValidateText(path.Child("clusters"), c)...)
	}
	for name := range spec.Hard {
		errs = append(errs, registry.ValidateText(path.Child("hard").Key(name), name)...)
	}
	if len(errs) > 0 {
		return errs
	}
	if spec.Namespace == "" {
		errs = append(errs, field.Required(path.Child("namespace"), "the namespace the quota is for (or ask with a LocalQuotaReport in it)"))
	} else {
		for _, msg := range validation.IsDNS1123Label(spec.Namespace) {
			errs = append(errs, field.Invalid(path.Child("namespace"), spec.Namespace, msg))
		}
	}
	errs = append(errs, validateHard(path.Child("hard"), spec.Hard)...)
	errs = append(errs, registry.ValidateMembers(path.Child("clusters"), spec.Clusters)...)
	if w := spec.Window; w != nil {
		errs = append(errs, registry.ValidateHistoryWindow(path.Child("window"), w.Duration, a.retention)...)
	}
	return errs
}

// validateHard says what is wrong with a proposed quota's hard limits:
// only what quotas limit on pods, each resource once (cpu is
// requests.cpu), an amount from 0 to maxAmount.
func validateHard(path *field.Path, hard map[string]resource.Quantity) field.ErrorList {
	var errs field.ErrorList
	if len(hard) == 0 {
		return field.ErrorList{field.Required(path, "the proposed quota's hard limits, e.g. requests.cpu: 8, requests.memory: 32Gi")}
	}
	names := make(map[string]string, len(hard))
	for _, name := range slices.Sorted(maps.Keys(hard)) {
		p := path.Key(name)
		r, ok := clustercapacity.CommittedResource(name)
		if !ok {
			errs = append(errs, field.NotSupported(p, name, []string{"pods", "requests.<resource>", "limits.<resource>", "cpu", "memory", "ephemeral-storage"}))
			continue
		}
		if other, dup := names[r]; dup {
			errs = append(errs, field.Duplicate(p, fmt.Sprintf("%s is %s, as %s is", name, r, other)))
			continue
		}
		names[r] = name
		switch q := hard[name]; {
		case q.Sign() < 0:
			errs = append(errs, field.Invalid(p, q.String(), "must not be negative"))
		case q.Cmp(*maxAmount) > 0:
			errs = append(errs, field.Invalid(p, q.String(), fmt.Sprintf("larger than any member could back (at most %s)", maxAmount.String())))
		}
	}
	return errs
}

// window is the spec's window: 168h by default, at most the retention.
func (a *answerer) window(spec platform.QuotaReportSpec) time.Duration {
	if spec.Window != nil {
		return spec.Window.Duration
	}
	return min(platform.DefaultRecommendWindow, a.retention)
}

// proposal is spec.hard by the resource each name commits (cpu is
// requests.cpu).
func proposal(hard map[string]resource.Quantity) map[string]resource.Quantity {
	out := make(map[string]resource.Quantity, len(hard))
	for name, q := range hard {
		if r, ok := clustercapacity.CommittedResource(name); ok {
			out[r] = q
		}
	}
	return out
}
