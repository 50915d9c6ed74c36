// Package placementreport answers PlacementReports: how many replicas of a
// pod shape each member cluster can take now, from the registry's nodes.
// Create only, nothing stored (as SubjectAccessReview); every report is
// authorized by the members it asks about before anything is looked up.
package placementreport

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/example/platform-apiserver/pkg/apis/platform"
	"github.com/example/platform-apiserver/pkg/apis/platform/v1alpha1"
	"github.com/example/platform-apiserver/pkg/registry"
	"github.com/example/platform-apiserver/pkg/registry/store"
)

// Registry answers placement queries.
type Registry interface {
	Placement(ctx context.Context, q store.PlacementQuery) ([]store.MemberFit, error)
}

// REST is the PlacementReport storage.
type REST struct {
	registry Registry
	authz    authorizer.UnconditionalAuthorizer
	limits   registry.Limits // of the node and member selectors; zero fields are the defaults
	// staleness judges each member's data age when the report is answered.
	staleness registry.MemberStaleness
}

var (
	_ rest.Creater              = &REST{}
	_ rest.Scoper               = &REST{}
	_ rest.SingularNameProvider = &REST{}
)

// NewREST answers reports from reg to the users authz allows to read the
// members asked about (the generic server's authorizer), with selectors
// bounded by limits (the server's --max-selector-* flags, as for lists),
// each member's data judged stale by s (--member-stale-after).
func NewREST(reg Registry, authz authorizer.UnconditionalAuthorizer, limits registry.Limits, s registry.MemberStaleness) *REST {
	return &REST{registry: reg, authz: authz, limits: limits, staleness: s}
}

func (r *REST) New() runtime.Object     { return &platform.PlacementReport{} }
func (r *REST) Destroy()                {}
func (r *REST) NamespaceScoped() bool   { return false }
func (r *REST) GetSingularName() string { return "placementreport" }

var reportResource = platform.Resource("placementreports")

// Create refuses a malformed report (400), then one whose user may not
// read a member it asks about (403), then answers it in its status.
func (r *REST) Create(ctx context.Context, obj runtime.Object, createValidation rest.ValidateObjectFunc, _ *metav1.CreateOptions) (runtime.Object, error) {
	report, ok := obj.(*platform.PlacementReport)
	if !ok {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("not a PlacementReport: %T", obj))
	}
	q, errs := query(&report.Spec, r.limits)
	if len(errs) > 0 {
		return nil, registry.BadQuestion(platform.Kind("PlacementReport"), report.Name, errs)
	}
	nodes, err := r.authorize(ctx, report)
	if err != nil {
		return nil, err
	}
	if err := registry.Admit(ctx, createValidation, obj); err != nil {
		return nil, err
	}
	fits, err := r.registry.Placement(ctx, q)
	if err != nil {
		return nil, registry.QueryError(err, reportResource, report.Name) // an invalid selector is a 400 there
	}
	for _, c := range q.Clusters {
		if !slices.ContainsFunc(fits, func(f store.MemberFit) bool { return f.ClusterID == c }) {
			return nil, apierrors.NewNotFound(platform.Resource("clustercapacities"), c)
		}
	}
	out := report.DeepCopy()
	out.Status = status(fits, report.Spec.Replicas, r.staleness, nodes)
	return out, nil
}

// authorize needs get on the ClusterCapacity of every member named (or
// list clustercapacities, one check for them all), or list to ask a
// selector's members or every member: the answer is a member's capacity,
// which its ClusterCapacity shows. A question about nodes (nodeQuestions)
// needs list nodecapacities too, since its answer depends on which nodes
// exist and what they hold. nodes says whether the caller may list
// nodecapacities, so may be told how many nodes have room.
func (r *REST) authorize(ctx context.Context, report *platform.PlacementReport) (nodes bool, err error) {
	members := authorizer.AttributesRecord{Verb: "list", APIGroup: platform.GroupName, APIVersion: v1alpha1.SchemeGroupVersion.Version,
		Resource: "clustercapacities", ResourceRequest: true}
	switch {
	case len(report.Spec.Clusters) == 0:
		if err := registry.AuthorizeQuestion(ctx, r.authz, members, reportResource, report.Name, "a placement report over a selector's members or every member"); err != nil {
			return false, err
		}
	case len(report.Spec.Clusters) > 1 && registry.Allowed(ctx, r.authz, members):
	default:
		members.Verb = "get"
		for _, c := range report.Spec.Clusters {
			members.Name = c
			if err := registry.AuthorizeQuestion(ctx, r.authz, members, reportResource, report.Name, "a placement report on member "+c); err != nil {
				return false, err
			}
		}
	}
	nodeList := authorizer.AttributesRecord{Verb: "list", APIGroup: platform.GroupName, APIVersion: v1alpha1.SchemeGroupVersion.Version,
		Resource: "nodecapacities", ResourceRequest: true}
	if asked := nodeQuestions(&report.Spec); len(asked) > 0 {
		err := registry.AuthorizeQuestion(ctx, r.authz, nodeList, reportResource, report.Name,
			"a placement report that asks about nodes ("+strings.Join(asked, ", ")+")")
		return err == nil, err
	}
	return registry.Allowed(ctx, r.authz, nodeList), nil
}

// nodeQuestions names the spec's fields whose answer depends on single
// nodes (their names, labels, taints, devices, placement by topology):
// a caller who may not list the nodes could learn them by asking.
func nodeQuestions(spec *platform.PlacementReportSpec) []string {
	var asked []string
	for _, f := range []struct {
		path string
		set  bool
	}{
		{"spec.nodeSelector", len(spec.NodeSelector) > 0},
		{"spec.nodeAffinity", len(spec.NodeAffinity) > 0},
		{"spec.tolerations", len(spec.Tolerations) > 0},
		{"spec.topologySpread", spec.TopologySpread != nil},
		{"spec.devices", len(spec.Devices) > 0},
	} {
		if f.set {
			asked = append(asked, f.path)
		}
	}
	return asked
}

// status is the answer: the members best first (most replicas, then
// current before stale, then by name) and their sum. Every member's data
// age is its mirror heartbeat's age now; it is stale unless Synced and
// that age within the bound (then its mirroring says Stale). A member
// without a heartbeat yet is aged from when it left Synced.
func status(fits []store.MemberFit, replicas int64, staleness registry.MemberStaleness, nodes bool) platform.PlacementReportStatus {
	var s platform.PlacementReportStatus
	for _, f := range fits {
		fresh := staleness.Judge(f.Mirroring, f.MirroringSince, f.CompleteAsOf)
		c := platform.PlacementClusterFit{Cluster: f.ClusterID, Fits: f.Fits, Mirroring: fresh.Mirroring, Stale: fresh.Stale, DataAge: fresh.DataAge}
		if nodes {
			c.Nodes = new(f.Nodes)
		}
		if replicas > 0 {
			c.FitsAll = new(f.Fits >= replicas)
		}
		s.Fits += f.Fits
		s.Clusters = append(s.Clusters, c)
	}
	slices.SortFunc(s.Clusters, func(a, b platform.PlacementClusterFit) int {
		if c := cmp.Compare(b.Fits, a.Fits); c != 0 {
			return c
		}
		if a.Stale != b.Stale {
			if a.Stale {
				return 1
			}
			return -1
		}
		return cmp.Compare(a.Cluster, b.Cluster)
	})
	return s
}
