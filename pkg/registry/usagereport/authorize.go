package usagereport

import (
	"context"

	"k8s.io/apiserver/pkg/authorization/authorizer"

	"github.com/example/platform-apiserver/pkg/apis/platform"
	"github.com/example/platform-apiserver/pkg/apis/platform/v1alpha1"
	"github.com/example/platform-apiserver/pkg/registry"
	"github.com/example/platform-apiserver/pkg/registry/nodecapacity"
)

// needs is the permission a question needs: to read what it asks about.
// RBAC's create on the report's kind only lets a user ask; what the answer
// reveals is what the user may get (docs/security.md, "Who may read what"):
//   - a namespace's usage (spec.namespace, and every LocalUsageReport):
//     get clusternamespaces in that namespace, named the member's id;
//   - a node's (spec.nodeName): get nodecapacities "<cluster>.<node>";
//   - a node selection's (spec.nodeSelector): list nodecapacities, cluster
//     wide, since the selector may match any node of the member, now or
//     later, and a list is how a user reads the nodes a selector matches;
//   - a whole member's: get clustercapacities named the member's id.
func needs(spec *platform.UsageReportSpec) authorizer.AttributesRecord {
	a := authorizer.AttributesRecord{Verb: "get", APIGroup: platform.GroupName, APIVersion: v1alpha1.SchemeGroupVersion.Version, ResourceRequest: true}
	switch {
	case spec.Namespace != "":
		a.Resource, a.Namespace, a.Name = "clusternamespaces", spec.Namespace, spec.Cluster
	case spec.NodeName != "":
		a.Resource, a.Name = "nodecapacities", nodecapacity.Name(spec.Cluster, spec.NodeName)
	case spec.NodeSelector != "":
		a.Verb, a.Resource = "list", "nodecapacities"
	default:
		a.Resource, a.Name = "clustercapacities", spec.Cluster
	}
	return a
}

// what says which question a permission is for, in a 403's words.
func what(spec *platform.UsageReportSpec) string {
	switch {
	case spec.Namespace != "":
		return "a namespace's usage"
	case spec.NodeName != "":
		return "a node's usage"
	case spec.NodeSelector != "":
		return "the usage of the nodes a selector matches"
	default:
		return "a member cluster's usage"
	}
}

// authorize asks the authorizer whether the request's user may read what q
// asks about.
func (a *answerer) authorize(ctx context.Context, q question) error {
	return registry.AuthorizeQuestion(ctx, a.authz, needs(&q.spec), q.resource, q.name, "a report of "+what(&q.spec))
}
