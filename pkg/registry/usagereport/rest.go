// Package usagereport answers UsageReports, queries of the registry's usage
// history: create only, nothing stored (as SubjectAccessReview).
package usagereport

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/example/platform-apiserver/pkg/apis/platform"
	"github.com/example/platform-apiserver/pkg/registry"
	"github.com/example/platform-apiserver/pkg/registry/nodecapacity"
	"github.com/example/platform-apiserver/pkg/registry/store"
)

// History is the registry's usage history.
type History interface {
	UsageHistory(ctx context.Context, q store.UsageQuery) (*store.UsageHistory, error)
}

// REST is the UsageReport storage.
type REST struct {
	history   History
	retention time.Duration
	now       func() time.Time
}

var (
	_ rest.Creater              = &REST{}
	_ rest.Scoper               = &REST{}
	_ rest.SingularNameProvider = &REST{}
)

// NewREST answers reports from history, for windows up to retention (how
// long the history is kept: discovery's --metrics-retention).
func NewREST(history History, retention time.Duration) *REST {
	return &REST{history: history, retention: retention, now: time.Now}
}

func (r *REST) New() runtime.Object     { return &platform.UsageReport{} }
func (r *REST) Destroy()                {}
func (r *REST) NamespaceScoped() bool   { return false }
func (r *REST) GetSingularName() string { return "usagereport" }

// Create answers the report in its status.
func (r *REST) Create(ctx context.Context, obj runtime.Object, createValidation rest.ValidateObjectFunc, _ *metav1.CreateOptions) (runtime.Object, error) {
	report, ok := obj.(*platform.UsageReport)
	if !ok {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("not a UsageReport: %T", obj))
	}
	if errs := r.validate(&report.Spec); len(errs) > 0 {
		// 400, as for a bad selector or window of a list, with the causes.
		err := apierrors.NewInvalid(platform.Kind("UsageReport"), report.Name, errs)
		err.ErrStatus.Code, err.ErrStatus.Reason = http.StatusBadRequest, metav1.StatusReasonBadRequest
		return nil, err
	}
	if createValidation != nil {
		if err := createValidation(ctx, obj.DeepCopyObject()); err != nil {
			return nil, err
		}
	}
	q := store.UsageQuery{ClusterID: report.Spec.Cluster, Node: report.Spec.NodeName, Namespace: report.Spec.Namespace,
		Since: r.now().Add(-report.Spec.Window.Duration)}
	if report.Spec.NodeSelector != "" {
		sel, _ := labels.Parse(report.Spec.NodeSelector) // validated
		q.Labels, _ = sel.Requirements()
	}
	h, err := r.history.UsageHistory(ctx, q)
	switch {
	case errors.Is(err, store.ErrNotFound) && q.Namespace != "":
		return nil, apierrors.NewNotFound(platform.Resource("clusternamespaces"), q.Namespace+"/"+q.ClusterID)
	case errors.Is(err, store.ErrNotFound) && q.Node != "":
		return nil, apierrors.NewNotFound(platform.Resource("nodecapacities"), nodecapacity.Name(q.ClusterID, q.Node))
	case errors.Is(err, store.ErrNotFound):
		return nil, apierrors.NewNotFound(platform.Resource("clustercapacities"), q.ClusterID)
	case err != nil:
		return nil, registry.APIError(err, platform.Resource("usagereports"), report.Name)
	}
	out := report.DeepCopy()
	out.Status = status(h)
	return out, nil
}

// validate says what is wrong with spec, each problem with how to fix it.
func (r *REST) validate(spec *platform.UsageReportSpec) field.ErrorList {
	var errs field.ErrorList
	path := field.NewPath("spec")
	if spec.Cluster == "" {
		errs = append(errs, field.Required(path.Child("cluster"), "the member cluster's id"))
	}
	if spec.NodeSelector != "" {
		if spec.NodeName != "" {
			errs = append(errs, field.Invalid(path.Child("nodeSelector"), spec.NodeSelector, "set spec.nodeName or spec.nodeSelector, not both"))
		}
		if _, err := labels.Parse(spec.NodeSelector); err != nil {
			errs = append(errs, field.Invalid(path.Child("nodeSelector"), spec.NodeSelector, err.Error()))
		}
	}
	if spec.Namespace != "" && (spec.NodeName != "" || spec.NodeSelector != "") {
		errs = append(errs, field.Invalid(path.Child("namespace"), spec.Namespace, "asks a namespace's usage: set no spec.nodeName or spec.nodeSelector with it"))
	}
	switch w := spec.Window.Duration; {
	case w <= 0:
		errs = append(errs, field.Invalid(path.Child("window"), spec.Window.String(), "must be positive, e.g. 1h or 24h"))
	case w > r.retention:
		errs = append(errs, field.Invalid(path.Child("window"), spec.Window.String(),
			fmt.Sprintf("longer than the usage history the server keeps (%s, --metrics-retention): ask for %s or less", r.retention, r.retention)))
	}
	return errs
}

func status(h *store.UsageHistory) platform.UsageReportStatus {
	s := platform.UsageReportStatus{Nodes: h.Nodes, Samples: h.Samples}
	if h.Samples == 0 {
		return s
	}
	from, to := metav1.NewTime(h.From), metav1.NewTime(h.To)
	s.From, s.To = &from, &to
	s.CPU = statistics(h.CPU, func(v int64) resource.Quantity { return *resource.NewScaledQuantity(v, resource.Nano) })
	s.Memory = statistics(h.Memory, func(v int64) resource.Quantity { return *resource.NewQuantity(v, resource.BinarySI) })
	s.Accuracy = fmt.Sprintf("percentiles within %g%%; average and max exact", 100*store.UsageAccuracy)
	return s
}

func statistics(st store.UsageStats, q func(int64) resource.Quantity) *platform.UsageStatistics {
	return &platform.UsageStatistics{Average: q(st.Average), P50: q(st.P50), P95: q(st.P95), P99: q(st.P99), Max: q(st.Max)}
}
