package registry

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/endpoints/request"
)

// AuthorizeQuestion asks authz whether the request's user may do attrs,
// the permission a query kind's question needs (a UsageReport's, a
// PlacementReport's): RBAC's create on the query's resource only lets a
// user ask. A refusal is a 403 for the query (resource, name) that says
// which permission neededFor needs. It looks nothing up, so its answer is
// the same whether what is asked about exists or not.
func AuthorizeQuestion(ctx context.Context, authz authorizer.UnconditionalAuthorizer, attrs authorizer.AttributesRecord,
	resource schema.GroupResource, name, neededFor string) error {
	user, ok := request.UserFrom(ctx)
	if !ok {
		return apierrors.NewInternalError(errors.New("the request carries no user to authorize the question for"))
	}
	attrs.User = user
	decision, reason, err := authz.Authorize(ctx, attrs)
	switch {
	case decision == authorizer.DecisionAllow:
		return nil
	case err != nil:
		// As the generic server's authorization filter answers an
		// authorizer that failed.
		return apierrors.NewInternalError(fmt.Errorf("authorizing the question: %w", err))
	}
	msg := fmt.Sprintf("%s, which %s needs; ask for that permission or ask about what you may read", forbidden(attrs), neededFor)
	if reason != "" {
		msg += ": " + reason
	}
	return apierrors.NewForbidden(resource, name, errors.New(msg))
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
