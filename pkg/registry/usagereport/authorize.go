package usagereport

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/endpoints/request"

	"github.com/example/platform-apiserver/pkg/apis/platform"
	"github.com/example/platform-apiserver/pkg/apis/platform/v1alpha1"
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
// asks about. It looks nothing up, so its answer is the same whether that
// exists or not.
func (a *answerer) authorize(ctx context.Context, q question) error {
	user, ok := request.UserFrom(ctx)
	if !ok {
		return apierrors.NewInternalError(errors.New("the request carries no user to authorize the report for"))
	}
	attrs := needs(&q.spec)
	attrs.User = user
	decision, reason, err := a.authz.Authorize(ctx, attrs)
	switch {
	case decision == authorizer.DecisionAllow:
		return nil
	case err != nil:
		// As the generic server's authorization filter answers an
		// authorizer that failed.
		return apierrors.NewInternalError(fmt.Errorf("authorizing the report: %w", err))
	}
	msg := fmt.Sprintf("%s, which a report of %s needs; ask for that permission or ask about what you may read", forbidden(attrs), what(&q.spec))
	if reason != "" {
		msg += ": " + reason
	}
	return apierrors.NewForbidden(q.resource, q.name, errors.New(msg))
}

// forbidden says what attrs asked, in the words of the generic server's 403s
// (responsewriters.forbiddenMessage), with the name.
func forbidden(attrs authorizer.AttributesRecord) string {
	s := fmt.Sprintf("User %q cannot %s resource %q in API group %q", attrs.User.GetName(), attrs.Verb, attrs.Resource, attrs.APIGroup)
	if attrs.Namespace != "" {
		s += fmt.Sprintf(" in the namespace %q", attrs.Namespace)
	} else {
		s += " at the cluster scope"
	}
	if attrs.Name != "" {
		s += fmt.Sprintf(" (name %q)", attrs.Name)
	}
	return s
}
