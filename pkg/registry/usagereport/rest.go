// Package usagereport answers UsageReports and LocalUsageReports, queries of
// the registry's usage history: create only, nothing stored (as
// SubjectAccessReview and LocalSubjectAccessReview). One answerer serves
// both kinds; every report is authorized by what it asks before anything
// is looked up (authorize.go).
package usagereport

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/example/platform-apiserver/pkg/apis/platform"
	"github.com/example/platform-apiserver/pkg/registry"
	"github.com/example/platform-apiserver/pkg/registry/nodecapacity"
	"github.com/example/platform-apiserver/pkg/registry/store"
	"github.com/example/platform-apiserver/pkg/units"
)

// History is the registry's usage history.
type History interface {
	UsageHistory(ctx context.Context, q store.UsageQuery) (*store.UsageHistory, error)
}

// NamespaceGetter reads a member namespace's record: namespace, then
// the member's id (store.Source.Get of ClusterNamespace).
type NamespaceGetter func(ctx context.Context, namespace, cluster string) (*store.ClusterNamespace, error)

// answerer answers the questions of both kinds.
type answerer struct {
	history    History
	namespaces NamespaceGetter // a recommendation's current requests and quota
	authz      authorizer.UnconditionalAuthorizer
	retention  time.Duration
	now        func() time.Time
	limits     registry.Limits // of nodeSelector; zero fields are the defaults
}

// REST is the UsageReport storage (cluster-scoped: any question).
type REST struct{ *answerer }

// LocalREST is the LocalUsageReport storage (namespaced: the usage of the
// namespace it is created in).
type LocalREST struct{ *answerer }

var (
	_ rest.Creater              = &REST{}
	_ rest.Scoper               = &REST{}
	_ rest.SingularNameProvider = &REST{}
	_ rest.Creater              = &LocalREST{}
	_ rest.Scoper               = &LocalREST{}
	_ rest.SingularNameProvider = &LocalREST{}
)

// NewREST answers reports from history, and recommendations with the
// namespaces' current requests and quotas, for windows up to retention (how
// long the history is kept: discovery's --metrics-retention), to the users
// authz allows to read what they ask about (the generic server's
// authorizer: SubjectAccessReviews to the hosting cluster).
func NewREST(history History, namespaces NamespaceGetter, authz authorizer.UnconditionalAuthorizer, retention time.Duration) *REST {
	return &REST{&answerer{history: history, namespaces: namespaces, authz: authz, retention: retention, now: time.Now}}
}

// WithLimits bounds the node selectors reports may ask (the server's
// --max-selector-* flags, as for lists); r is returned.
func (r *REST) WithLimits(l registry.Limits) *REST {
	r.limits = l
	return r
}

// Local is the LocalUsageReport storage answered by the same answerer.
func (r *REST) Local() *LocalREST { return &LocalREST{r.answerer} }

func (r *REST) New() runtime.Object     { return &platform.UsageReport{} }
func (r *REST) Destroy()                {}
func (r *REST) NamespaceScoped() bool   { return false }
func (r *REST) GetSingularName() string { return "usagereport" }

func (r *LocalREST) New() runtime.Object     { return &platform.LocalUsageReport{} }
func (r *LocalREST) Destroy()                {}
func (r *LocalREST) NamespaceScoped() bool   { return true }
func (r *LocalREST) GetSingularName() string { return "localusagereport" }

// Create answers the report in its status.
func (r *REST) Create(ctx context.Context, obj runtime.Object, createValidation rest.ValidateObjectFunc, _ *metav1.CreateOptions) (runtime.Object, error) {
	report, ok := obj.(*platform.UsageReport)
	if !ok {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("not a UsageReport: %T", obj))
	}
	q := question{kind: "UsageReport", resource: platform.Resource("usagereports"), name: report.Name, spec: report.Spec,
		errs: r.validate(&report.Spec)}
	status, err := r.answer(ctx, q, func() error { return registry.Admit(ctx, createValidation, obj) })
	if err != nil {
		return nil, err
	}
	out := report.DeepCopy()
	out.Status = status
	return out, nil
}

// Create answers the report of its namespace in its status.
func (r *LocalREST) Create(ctx context.Context, obj runtime.Object, createValidation rest.ValidateObjectFunc, _ *metav1.CreateOptions) (runtime.Object, error) {
	report, ok := obj.(*platform.LocalUsageReport)
	if !ok {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("not a LocalUsageReport: %T", obj))
	}
	// The generic create handler has made the object's namespace the
	// request's (or refused a different one).
	// The question is its namespace's: what validateLocal refuses is left
	// out of the rest of the validation, so each problem is said once.
	q := question{kind: "LocalUsageReport", resource: platform.Resource("localusagereports"), name: report.Name, spec: report.Spec}
	q.spec.Namespace, q.spec.NodeName, q.spec.NodeSelector = report.Namespace, "", ""
	q.errs = append(validateLocal(&report.Spec, report.Namespace), r.validate(&q.spec)...)
	status, err := r.answer(ctx, q, func() error { return registry.Admit(ctx, createValidation, obj) })
	if err != nil {
		return nil, err
	}
	out := report.DeepCopy()
	out.Status = status
	return out, nil
}

// question is a report as the answerer sees it, whichever kind asked.
type question struct {
	kind     string
	resource schema.GroupResource // of the report, for its errors
	name     string
	spec     platform.UsageReportSpec
	errs     field.ErrorList // what validation found wrong
}

// answer refuses a bad question (400), then one its user may not ask (403),
// before anything is looked up, so the answer never says whether what is
// asked about exists to someone who may not read it; then it runs the
// admission check and asks the history.
func (a *answerer) answer(ctx context.Context, q question, admit func() error) (platform.UsageReportStatus, error) {
	if len(q.errs) > 0 {
		// 400, as for a bad selector or window of a list, with the causes.
		return platform.UsageReportStatus{}, registry.BadQuestion(platform.Kind(q.kind), q.name, q.errs)
	}
	if err := a.authorize(ctx, q); err != nil {
		return platform.UsageReportStatus{}, err
	}
	if err := admit(); err != nil {
		return platform.UsageReportStatus{}, err
	}
	spec := q.spec
	uq := store.UsageQuery{ClusterID: spec.Cluster, Node: spec.NodeName, Namespace: spec.Namespace,
		Since: a.now().Add(-a.window(spec))}
	if spec.Step != nil {
		uq.Step = spec.Step.Duration
	}
	if r := spec.Recommend; r != nil {
		uq.Recommend = &store.RecommendQuery{Percentile: float64(percentile(r)) / 100, Headroom: float64(headroom(r)) / 100}
	}
	if spec.NodeSelector != "" {
		sel, _ := labels.Parse(spec.NodeSelector) // validated
		uq.Labels, _ = sel.Requirements()
	}
	h, err := a.history.UsageHistory(ctx, uq)
	switch {
	case errors.Is(err, store.ErrNotFound) && uq.Namespace != "":
		return platform.UsageReportStatus{}, apierrors.NewNotFound(platform.Resource("clusternamespaces"), uq.Namespace+"/"+uq.ClusterID)
	case errors.Is(err, store.ErrNotFound) && uq.Node != "":
		return platform.UsageReportStatus{}, apierrors.NewNotFound(platform.Resource("nodecapacities"), nodecapacity.Name(uq.ClusterID, uq.Node))
	case errors.Is(err, store.ErrNotFound):
		return platform.UsageReportStatus{}, apierrors.NewNotFound(platform.Resource("clustercapacities"), uq.ClusterID)
	case err != nil:
		return platform.UsageReportStatus{}, registry.QueryError(err, q.resource, q.name)
	}
	st := status(h)
	if h.Recommendation != nil {
		ns, err := a.namespaces(ctx, uq.Namespace, uq.ClusterID)
		switch {
		case errors.Is(err, store.ErrNotFound):
			return platform.UsageReportStatus{}, apierrors.NewNotFound(platform.Resource("clusternamespaces"), uq.Namespace+"/"+uq.ClusterID)
		case err != nil:
			return platform.UsageReportStatus{}, registry.QueryError(err, q.resource, q.name)
		}
		st.Recommendation = recommendation(spec.Recommend, h.Recommendation, ns)
	}
	return st, nil
}

// validate says what is wrong with spec, each problem with how to fix it.
func (a *answerer) validate(spec *platform.UsageReportSpec) field.ErrorList {
	var errs field.ErrorList
	path := field.NewPath("spec")
	for _, f := range []struct {
		name, value string
	}{{"cluster", spec.Cluster}, {"nodeName", spec.NodeName}, {"nodeSelector", spec.NodeSelector}, {"namespace", spec.Namespace}} {
		errs = append(errs, registry.ValidateText(path.Child(f.name), f.value)...)
	}
	if len(errs) > 0 {
		return errs // nothing more to say about text that cannot be compared
	}
	if spec.Cluster == "" {
		errs = append(errs, field.Required(path.Child("cluster"), "the member cluster's id"))
	}
	if spec.NodeSelector != "" {
		if spec.NodeName != "" {
			errs = append(errs, field.Invalid(path.Child("nodeSelector"), spec.NodeSelector, "set spec.nodeName or spec.nodeSelector, not both"))
		}
		sel, err := labels.Parse(spec.NodeSelector)
		if err != nil {
			errs = append(errs, field.Invalid(path.Child("nodeSelector"), spec.NodeSelector, err.Error()))
		} else if reqs, _ := sel.Requirements(); a.limits.CheckLabelRequirements(reqs) != nil {
			// Forbidden, not Invalid: the answer does not echo a selector that large.
			errs = append(errs, field.Forbidden(path.Child("nodeSelector"), a.limits.CheckLabelRequirements(reqs).Error()))
		}
	}
	if spec.Namespace != "" && (spec.NodeName != "" || spec.NodeSelector != "") {
		errs = append(errs, field.Invalid(path.Child("namespace"), spec.Namespace, "asks a namespace's usage: set no spec.nodeName or spec.nodeSelector with it"))
	}
	errs = append(errs, validateRecommend(path.Child("recommend"), spec)...)
	w := a.window(*spec)
	if bad := registry.ValidateHistoryWindow(path.Child("window"), w, a.retention); len(bad) > 0 {
		return append(errs, bad...)
	}
	return append(errs, validateStep(path.Child("step"), spec.Step, w)...)
}

// window is the spec's window: a recommendation's unset one is
// DefaultRecommendWindow, at most the retention.
func (a *answerer) window(spec platform.UsageReportSpec) time.Duration {
	if spec.Recommend != nil && spec.Window.Duration == 0 {
		return min(platform.DefaultRecommendWindow, a.retention)
	}
	return spec.Window.Duration
}

// validateStep says what is wrong with a step for a window of w: it must be
// whole hours (the history is kept hour by hour), no longer than the hours
// the window covers, and cut them into at most MaxUsageBuckets buckets.
func validateStep(path *field.Path, step *metav1.Duration, w time.Duration) field.ErrorList {
	if step == nil {
		return nil
	}
	s := step.Duration
	switch hours := windowHours(w); {
	case s <= 0 || s%time.Hour != 0:
		return field.ErrorList{field.Invalid(path, s.String(), "must be whole hours, e.g. 1h or 24h: the usage history is kept hour by hour")}
	case s > hours:
		return field.ErrorList{field.Invalid(path, s.String(),
			fmt.Sprintf("longer than the %s the window covers: ask a step of at most %s, or a longer window", hours, hours))}
	case buckets(hours, s) > platform.MaxUsageBuckets:
		least := time.Hour
		for buckets(hours, least) > platform.MaxUsageBuckets {
			least += time.Hour
		}
		return field.ErrorList{field.Invalid(path, s.String(),
			fmt.Sprintf("cuts the window into up to %d buckets, more than %d: ask a step of at least %s", buckets(hours, s), platform.MaxUsageBuckets, least))}
	}
	return nil
}

// windowHours is how long the whole hours a window of w overlaps are, at
// most: the current hour and those w reaches back into.
func windowHours(w time.Duration) time.Duration {
	return (w + time.Hour - 1).Truncate(time.Hour) + time.Hour
}

// buckets bounds the steps of s, aligned to the epoch, that hours overlap.
func buckets(hours, s time.Duration) int {
	return int((hours+s-1)/s) + 1
}

// validateLocal says what a LocalUsageReport in namespace may not ask: a
// namespace other than its own, or nodes.
func validateLocal(spec *platform.UsageReportSpec, namespace string) field.ErrorList {
	var errs field.ErrorList
	path := field.NewPath("spec")
	if spec.Namespace != "" && spec.Namespace != namespace {
		errs = append(errs, field.Invalid(path.Child("namespace"), spec.Namespace,
			fmt.Sprintf("a LocalUsageReport asks the usage of the namespace it is created in (%q): leave spec.namespace empty or create the report in %q", namespace, spec.Namespace)))
	}
	for _, f := range []struct{ name, value string }{{"nodeName", spec.NodeName}, {"nodeSelector", spec.NodeSelector}} {
		if f.value != "" {
			errs = append(errs, field.Forbidden(path.Child(f.name), "a LocalUsageReport asks a namespace's usage: ask nodes' with a UsageReport"))
		}
	}
	return errs
}

func status(h *store.UsageHistory) platform.UsageReportStatus {
	s := platform.UsageReportStatus{Nodes: h.Nodes, Samples: h.Samples}
	if !h.SamplesAsOf.IsZero() {
		s.SamplesCompleteAsOf = new(metav1.NewTime(h.SamplesAsOf))
	}
	if h.Samples == 0 {
		return s
	}
	from, to := metav1.NewTime(h.From), metav1.NewTime(h.To)
	s.From, s.To = &from, &to
	s.CPU, s.Memory = statistics(h.CPU, units.CPU), statistics(h.Memory, units.Memory)
	s.Accuracy = fmt.Sprintf("percentiles within %g%%; average and max exact before rounding (CPU to millicores, memory to MiB)", 100*store.UsageAccuracy)
	for _, b := range h.Series {
		s.Series = append(s.Series, platform.UsageBucket{Start: metav1.NewTime(b.Start), Samples: b.Samples,
			CPU: point(b.CPU, units.CPU), Memory: point(b.Memory, units.Memory)})
	}
	return s
}

func statistics(st store.UsageStats, q func(int64) resource.Quantity) *platform.UsageStatistics {
	return &platform.UsageStatistics{Average: q(st.Average), P50: q(st.P50), P95: q(st.P95), P99: q(st.P99), Max: q(st.Max)}
}

func point(st store.UsageStats, q func(int64) resource.Quantity) platform.UsagePoint {
	return platform.UsagePoint{Average: q(st.Average), P95: q(st.P95), Max: q(st.Max)}
}
