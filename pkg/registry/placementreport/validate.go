package placementreport

import (
	"maps"
	"math"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/example/platform-apiserver/pkg/apis/platform"
	"github.com/example/platform-apiserver/pkg/registry"
	"github.com/example/platform-apiserver/pkg/registry/store"
)

// query turns spec into the registry's question, or says what is wrong
// with it, each problem with how to fix it.
func query(spec *platform.PlacementReportSpec, limits registry.Limits) (store.PlacementQuery, field.ErrorList) {
	path := field.NewPath("spec")
	if errs := tooLong(spec, limits.WithDefaults(), path); len(errs) > 0 {
		return store.PlacementQuery{}, errs // refused at the cost of counting
	}
	if errs := validateText(spec, path); len(errs) > 0 {
		return store.PlacementQuery{}, errs // nothing more to say about text that cannot be compared
	}
	q := store.PlacementQuery{Other: map[string]int64{}, Devices: map[string]int64{}}
	var errs field.ErrorList
	errs = append(errs, requests(&q, spec.Requests, path.Child("requests"))...)
	errs = append(errs, devices(&q, spec.Devices, path.Child("devices"))...)
	if spec.Replicas < 0 {
		errs = append(errs, field.Invalid(path.Child("replicas"), spec.Replicas, "must be 0 (not asked) or more"))
	}
	var terms field.ErrorList
	q.Nodes, terms = nodeTerms(spec, path)
	errs = append(errs, terms...)
	var all labels.Requirements
	for _, t := range q.Nodes {
		all = append(all, t.Labels...)
	}
	if err := limits.CheckLabelRequirements(all); err != nil {
		errs = append(errs, field.Forbidden(path.Child("nodeAffinity"), err.Error()))
	}
	errs = append(errs, tolerations(&q, spec.Tolerations, path.Child("tolerations"))...)
	if ts := spec.TopologySpread; ts != nil {
		p := path.Child("topologySpread")
		for _, msg := range validation.IsQualifiedName(ts.TopologyKey) {
			errs = append(errs, field.Invalid(p.Child("topologyKey"), ts.TopologyKey, msg+" (a node label, e.g. topology.kubernetes.io/zone)"))
		}
		if ts.MaxSkew < 1 {
			errs = append(errs, field.Invalid(p.Child("maxSkew"), ts.MaxSkew, "must be at least 1"))
		}
		q.SpreadKey, q.MaxSkew = ts.TopologyKey, int64(ts.MaxSkew)
	}
	errs = append(errs, members(&q, spec, limits, path)...)
	return q, errs
}

// tooLong refuses the spec's lists longer than the limits: each costs the
// registry a scan per node (tolerations per taint, requests and devices
// per node, affinity terms per label) or a check per member.
func tooLong(spec *platform.PlacementReportSpec, l registry.Limits, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	check := func(p *field.Path, n, limit int, flag string) {
		if n > limit {
			errs = append(errs, registry.TooMany(p, n, limit, flag))
		}
	}
	check(path.Child("nodeAffinity"), len(spec.NodeAffinity), l.QueryAffinityTerms, "--max-query-affinity-terms")
	for i, t := range spec.NodeAffinity {
		check(path.Child("nodeAffinity").Index(i).Child("matchExpressions"), len(t.MatchExpressions), l.SelectorRequirements, "--max-selector-requirements")
		for j, f := range t.MatchFields {
			check(path.Child("nodeAffinity").Index(i).Child("matchFields").Index(j).Child("values"), len(f.Values), l.SelectorValues, "--max-selector-values")
		}
	}
	check(path.Child("nodeSelector"), len(spec.NodeSelector), l.SelectorRequirements, "--max-selector-requirements")
	check(path.Child("tolerations"), len(spec.Tolerations), l.QueryTolerations, "--max-query-tolerations")
	check(path.Child("requests"), len(spec.Requests), l.QueryResources, "--max-query-resources")
	check(path.Child("devices"), len(spec.Devices), l.QueryResources, "--max-query-resources")
	check(path.Child("clusters"), len(spec.Clusters), l.QueryClusters, "--max-query-clusters")
	return errs
}

func validateText(spec *platform.PlacementReportSpec, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	check := func(p *field.Path, s string) { errs = append(errs, registry.ValidateText(p, s)...) }
	for k, v := range spec.NodeSelector {
		check(path.Child("nodeSelector").Key(k), k+v)
	}
	for i, t := range spec.NodeAffinity {
		for j, r := range slices.Concat(t.MatchExpressions, t.MatchFields) {
			check(path.Child("nodeAffinity").Index(i).Index(j), r.Key+strings.Join(r.Values, ""))
		}
	}
	for i, t := range spec.Tolerations {
		check(path.Child("tolerations").Index(i), t.Key+t.Value)
	}
	for i, c := range spec.Clusters {
		check(path.Child("clusters").Index(i), c)
	}
	check(path.Child("clusterSelector"), spec.ClusterSelector)
	return errs
}

// requests puts cpu in millicores, memory and every other resource in
// their units (rounded up, as kube-scheduler reads a pod's requests).
func requests(q *store.PlacementQuery, reqs map[string]resource.Quantity, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, name := range slices.Sorted(maps.Keys(reqs)) {
		v, p := reqs[name], path.Key(name)
		for _, msg := range validation.IsQualifiedName(name) {
			errs = append(errs, field.Invalid(p, name, msg+" (a resource name, e.g. cpu, memory or nvidia.com/gpu)"))
		}
		switch {
		case name == string(corev1.ResourcePods):
			errs = append(errs, field.Forbidden(p, "each replica is one pod: the pod count of a node is always checked, leave pods out"))
		case v.Sign() < 0:
			errs = append(errs, field.Invalid(p, v.String(), "must not be negative"))
		case name == string(corev1.ResourceCPU) && v.Cmp(*maxMilli) > 0, v.Cmp(*maxValue) > 0:
			// Beyond them MilliValue and Value wrap or return 0, which
			// would read as "not requested".
			errs = append(errs, field.Invalid(p, v.String(), "out of range: the registry counts cpu in int64 millicores and every other resource in int64 units"))
		case name == string(corev1.ResourceCPU):
			q.CPUMillis = v.MilliValue()
		case name == string(corev1.ResourceMemory):
			q.MemoryBytes = v.Value()
		case !native(name) && v.MilliValue()%1000 != 0:
			errs = append(errs, field.Invalid(p, v.String(), "an extended resource is requested in whole units, as in a pod"))
		case v.Sign() > 0:
			q.Other[name] = v.Value()
		}
	}
	return errs
}

// maxMilli and maxValue are the largest requests the registry's int64
// amounts hold: cpu in millicores, everything else in units.
var (
	maxMilli = resource.NewMilliQuantity(math.MaxInt64, resource.DecimalSI)
	maxValue = resource.NewQuantity(math.MaxInt64, resource.DecimalSI)
)

// native says whether name is a Kubernetes resource (not an extended one):
// unprefixed or in kubernetes.io, as in the pod API's validation.
func native(name string) bool {
	return !strings.Contains(name, "/") || strings.Contains(name, "kubernetes.io/")
}

func devices(q *store.PlacementQuery, ds []platform.DeviceRequest, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, d := range ds {
		p := path.Index(i)
		for _, msg := range validation.IsDNS1123Subdomain(d.Driver) {
			errs = append(errs, field.Invalid(p.Child("driver"), d.Driver, msg+" (a DRA driver name, e.g. gpu.example.com)"))
		}
		if _, dup := q.Devices[d.Driver]; dup {
			errs = append(errs, field.Duplicate(p.Child("driver"), d.Driver))
		}
		if d.Count < 1 {
			errs = append(errs, field.Invalid(p.Child("count"), d.Count, "must be at least 1"))
		}
		q.Devices[d.Driver] = d.Count
	}
	return errs
}

// operators are the node selector operators as label selection operators.
var operators = map[string]selection.Operator{
	string(corev1.NodeSelectorOpIn): selection.In, string(corev1.NodeSelectorOpNotIn): selection.NotIn,
	string(corev1.NodeSelectorOpExists): selection.Exists, string(corev1.NodeSelectorOpDoesNotExist): selection.DoesNotExist,
	string(corev1.NodeSelectorOpGt): selection.GreaterThan, string(corev1.NodeSelectorOpLt): selection.LessThan,
}

// nodeTerms are the node affinity terms, each with the node selector's
// requirements too (a node must match both); the node selector alone
// without terms.
func nodeTerms(spec *platform.PlacementReportSpec, path *field.Path) ([]store.NodeTerm, field.ErrorList) {
	var errs field.ErrorList
	var selector labels.Requirements
	for _, k := range slices.Sorted(maps.Keys(spec.NodeSelector)) {
		r, err := labels.NewRequirement(k, selection.Equals, []string{spec.NodeSelector[k]})
		if err != nil {
			errs = append(errs, field.Invalid(path.Child("nodeSelector").Key(k), spec.NodeSelector[k], err.Error()))
			continue
		}
		selector = append(selector, *r)
	}
	if len(spec.NodeAffinity) == 0 {
		if len(selector) == 0 {
			return nil, errs
		}
		return []store.NodeTerm{{Labels: selector}}, errs
	}
	terms := make([]store.NodeTerm, 0, len(spec.NodeAffinity))
	for i, t := range spec.NodeAffinity {
		p := path.Child("nodeAffinity").Index(i)
		if len(t.MatchExpressions) == 0 && len(t.MatchFields) == 0 {
			terms = append(terms, store.NodeTerm{}) // matches no node, as in kube-scheduler
			continue
		}
		term := store.NodeTerm{Labels: slices.Clone(selector)}
		for j, e := range t.MatchExpressions {
			ep := p.Child("matchExpressions").Index(j)
			op, ok := operators[e.Operator]
			if !ok {
				errs = append(errs, field.NotSupported(ep.Child("operator"), e.Operator, slices.Sorted(maps.Keys(operators))))
				continue
			}
			r, err := labels.NewRequirement(e.Key, op, e.Values)
			if err != nil {
				errs = append(errs, field.Invalid(ep, e.Key, err.Error()))
				continue
			}
			term.Labels = append(term.Labels, *r)
		}
		for j, f := range t.MatchFields {
			fp := p.Child("matchFields").Index(j)
			switch {
			case f.Key != "metadata.name":
				errs = append(errs, field.NotSupported(fp.Child("key"), f.Key, []string{"metadata.name"}))
			case len(f.Values) == 0:
				errs = append(errs, field.Required(fp.Child("values"), "the node names to match"))
			case f.Operator == string(corev1.NodeSelectorOpIn):
				term.Names = append(term.Names, f.Values...)
			case f.Operator == string(corev1.NodeSelectorOpNotIn):
				term.NotNames = append(term.NotNames, f.Values...)
			default:
				errs = append(errs, field.NotSupported(fp.Child("operator"), f.Operator, []string{"In", "NotIn"}))
			}
		}
		terms = append(terms, term)
	}
	return terms, errs
}

var effects = []string{"", string(corev1.TaintEffectNoSchedule), string(corev1.TaintEffectPreferNoSchedule), string(corev1.TaintEffectNoExecute)}

func tolerations(q *store.PlacementQuery, ts []platform.Toleration, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, t := range ts {
		p := path.Index(i)
		if t.Key != "" {
			for _, msg := range validation.IsQualifiedName(t.Key) {
				errs = append(errs, field.Invalid(p.Child("key"), t.Key, msg))
			}
		}
		switch t.Operator {
		case string(corev1.TolerationOpExists):
			if t.Value != "" {
				errs = append(errs, field.Invalid(p.Child("value"), t.Value, "must be empty when operator is Exists"))
			}
		case "", string(corev1.TolerationOpEqual):
			if t.Key == "" {
				errs = append(errs, field.Invalid(p.Child("operator"), t.Operator, "an empty key tolerates every taint only with operator Exists"))
			}
			for _, msg := range validation.IsValidLabelValue(t.Value) {
				errs = append(errs, field.Invalid(p.Child("value"), t.Value, msg))
			}
		default:
			errs = append(errs, field.NotSupported(p.Child("operator"), t.Operator, []string{"Equal", "Exists"}))
		}
		if !slices.Contains(effects, t.Effect) {
			errs = append(errs, field.NotSupported(p.Child("effect"), t.Effect, effects[1:]))
		}
		q.Tolerations = append(q.Tolerations, store.Toleration{Key: t.Key, Operator: t.Operator, Value: t.Value, Effect: t.Effect})
	}
	return errs
}

// members are the members to consider: named, selected, or every one.
func members(q *store.PlacementQuery, spec *platform.PlacementReportSpec, limits registry.Limits, path *field.Path) field.ErrorList {
	errs := registry.ValidateMembers(path.Child("clusters"), spec.Clusters)
	q.Clusters = spec.Clusters
	if spec.ClusterSelector == "" {
		return errs
	}
	p := path.Child("clusterSelector")
	if len(spec.Clusters) > 0 {
		return append(errs, field.Invalid(p, spec.ClusterSelector, "set spec.clusters or spec.clusterSelector, not both"))
	}
	sel, err := labels.Parse(spec.ClusterSelector)
	if err != nil {
		return append(errs, field.Invalid(p, spec.ClusterSelector, err.Error()))
	}
	q.Members, _ = sel.Requirements()
	if err := limits.CheckLabelRequirements(q.Members); err != nil {
		errs = append(errs, field.Forbidden(p, err.Error()))
	}
	if len(q.Members) == 0 {
		errs = append(errs, field.Invalid(p, spec.ClusterSelector, "selects every member: leave it empty for that"))
	}
	return errs
}
