// Package quotareport answers QuotaReports and LocalQuotaReports: whether a
// proposed ResourceQuota for a namespace can be backed by each member
// cluster, from what its quotas promise (ClusterCapacity's committed
// quota), its schedulable allocatable and the platform's overcommit
// policy, next to the namespace's usage. Create only, nothing stored;
// every report is authorized by what its answer reveals before anything is
// looked up.
package quotareport

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/example/platform-apiserver/pkg/apis/platform"
	"github.com/example/platform-apiserver/pkg/registry"
	"github.com/example/platform-apiserver/pkg/registry/clusternamespace"
	"github.com/example/platform-apiserver/pkg/registry/store"
)

// Registry is what a quota report reads: the members' ClusterCapacities,
// the namespace's ClusterNamespaces and its usage history.
type Registry struct {
	Members    store.Source[store.ClusterCapacity]
	Namespaces store.Source[store.ClusterNamespace]
	History    func(ctx context.Context, q store.UsageQuery) (*store.UsageHistory, error)
}

// answerer answers the questions of both kinds.
type answerer struct {
	reg       Registry
	authz     authorizer.UnconditionalAuthorizer
	policy    Policy
	limits    registry.Limits // of spec.hard and spec.clusters; zero fields are the defaults
	retention time.Duration
	staleness registry.MemberStaleness
	now       func() time.Time
}

// REST is the QuotaReport storage (cluster-scoped: any namespace).
type REST struct{ *answerer }

// LocalREST is the LocalQuotaReport storage (namespaced: its own).
type LocalREST struct{ *answerer }

var (
	_ rest.Creater              = &REST{}
	_ rest.Scoper               = &REST{}
	_ rest.SingularNameProvider = &REST{}
	_ rest.Creater              = &LocalREST{}
	_ rest.Scoper               = &LocalREST{}
	_ rest.SingularNameProvider = &LocalREST{}
)

// NewREST answers reports from reg under policy (--quota-max-overcommit),
// questions bounded by limits (--max-query-resources, --max-query-clusters),
// the namespace's usage over windows up to retention (--metrics-retention),
// members judged stale by s (--member-stale-after), to the users authz
// allows to read what the answer reveals.
func NewREST(reg Registry, authz authorizer.UnconditionalAuthorizer, policy Policy, limits registry.Limits, retention time.Duration, s registry.MemberStaleness) *REST {
	return &REST{&answerer{reg: reg, authz: authz, policy: policy, limits: limits, retention: retention, staleness: s, now: time.Now}}
}

// Local is the LocalQuotaReport storage answered by the same answerer.
func (r *REST) Local() *LocalREST { return &LocalREST{r.answerer} }

func (r *REST) New() runtime.Object     { return &platform.QuotaReport{} }
func (r *REST) Destroy()                {}
func (r *REST) NamespaceScoped() bool   { return false }
func (r *REST) GetSingularName() string { return "quotareport" }

func (r *LocalREST) New() runtime.Object     { return &platform.LocalQuotaReport{} }
func (r *LocalREST) Destroy()                {}
func (r *LocalREST) NamespaceScoped() bool   { return true }
func (r *LocalREST) GetSingularName() string { return "localquotareport" }

// Create answers the report in its status.
func (r *REST) Create(ctx context.Context, obj runtime.Object, createValidation rest.ValidateObjectFunc, _ *metav1.CreateOptions) (runtime.Object, error) {
	report, ok := obj.(*platform.QuotaReport)
	if !ok {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("not a QuotaReport: %T", obj))
	}
	q := question{kind: "QuotaReport", resource: platform.Resource("quotareports"), name: report.Name, spec: report.Spec}
	q.errs = r.validate(&q.spec)
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
	report, ok := obj.(*platform.LocalQuotaReport)
	if !ok {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("not a LocalQuotaReport: %T", obj))
	}
	q := question{kind: "LocalQuotaReport", resource: platform.Resource("localquotareports"), name: report.Name, spec: report.Spec}
	var errs field.ErrorList
	if ns := report.Spec.Namespace; ns != "" && ns != report.Namespace {
		errs = append(errs, field.Invalid(field.NewPath("spec", "namespace"), ns,
			fmt.Sprintf("a LocalQuotaReport asks for the namespace it is created in (%q): leave spec.namespace empty or create the report in %q", report.Namespace, ns)))
	}
	q.spec.Namespace = report.Namespace
	errs = append(errs, r.validate(&q.spec)...)
	q.errs = errs
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
	resource schema.GroupResource
	name     string
	spec     platform.QuotaReportSpec
	errs     field.ErrorList
}

// answer refuses a bad question (400), then one whose answer its user may
// not read (403), before anything is looked up; then it runs the admission
// check and answers.
func (a *answerer) answer(ctx context.Context, q question, admit func() error) (platform.QuotaReportStatus, error) {
	if len(q.errs) > 0 {
		return platform.QuotaReportStatus{}, registry.BadQuestion(platform.Kind(q.kind), q.name, q.errs)
	}
	if err := a.authorize(ctx, q); err != nil {
		return platform.QuotaReportStatus{}, err
	}
	if err := admit(); err != nil {
		return platform.QuotaReportStatus{}, err
	}
	members, err := a.members(ctx, q.spec.Clusters)
	if err != nil {
		return platform.QuotaReportStatus{}, err
	}
	namespaces, err := a.namespaces(ctx, q.spec.Namespace)
	if err != nil {
		return platform.QuotaReportStatus{}, registry.QueryError(err, q.resource, q.name)
	}
	proposed := proposal(q.spec.Hard)
	since := a.now().Add(-a.window(q.spec))
	var st platform.QuotaReportStatus
	for i := range members {
		cc := &members[i]
		c := a.judge(cc, namespaces[cc.ClusterID], proposed)
		h, err := a.reg.History(ctx, store.UsageQuery{ClusterID: cc.ClusterID, Namespace: q.spec.Namespace, Since: since})
		switch {
		case err == nil && h.Samples > 0:
			c.UsageP95 = usageP95(h)
		case err != nil && !isNotFound(err): // a namespace the member has never had: no usage
			return platform.QuotaReportStatus{}, registry.QueryError(err, q.resource, q.name)
		}
		st.Clusters = append(st.Clusters, c)
	}
	sortBest(st.Clusters)
	return st, nil
}

func isNotFound(err error) bool { return errors.Is(err, store.ErrNotFound) }

// namespaces reads the namespace's ClusterNamespace in every member that
// has it, by member.
func (a *answerer) namespaces(ctx context.Context, namespace string) (map[string]*store.ClusterNamespace, error) {
	all, err := a.reg.Namespaces.All(ctx, store.ListOptions{Fields: []store.FieldRequirement{
		{Field: clusternamespace.Kind.MustField("metadata.namespace"), Op: selection.Equals, Value: namespace}}}, listPage)
	if err != nil {
		return nil, err
	}
	out := make(map[string]*store.ClusterNamespace, len(all))
	for i := range all {
		out[all[i].ClusterID] = &all[i]
	}
	return out, nil
}

// listPage is the page size of a report's reads of every member.
const listPage = 500

// members reads the members named, or every member.
func (a *answerer) members(ctx context.Context, named []string) ([]store.ClusterCapacity, error) {
	if len(named) > 0 {
		out := make([]store.ClusterCapacity, 0, len(named))
		for _, c := range named {
			cc, err := a.reg.Members.Get(ctx, "", c)
			switch {
			case isNotFound(err):
				return nil, apierrors.NewNotFound(platform.Resource("clustercapacities"), c)
			case err != nil:
				return nil, registry.QueryError(err, platform.Resource("clustercapacities"), c)
			}
			out = append(out, *cc)
		}
		return out, nil
	}
	all, err := a.reg.Members.All(ctx, store.ListOptions{}, listPage)
	if err != nil {
		return nil, registry.QueryError(err, platform.Resource("clustercapacities"), "")
	}
	return all, nil
}
