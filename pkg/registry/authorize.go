package registry

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"
)

// AuthorizeQuestion asks authz whether the request's user may do attrs,
// the permission a query kind's question needs (a UsageReport's, a
// PlacementReport's): RBAC's create on the query's resource only lets a
// user ask. A refusal is a 403 for the query (resource, name) that says
// which permission neededFor needs. It looks nothing up, so its answer is
// the same whether what is asked about exists or not.
func AuthorizeQuestion(ctx context.Context, authz authorizer.UnconditionalAuthorizer, attrs authorizer.AttributesRecord,
	resource schema.GroupResource, name, neededFor string) error {
	decision, reason, err := authorizeUser(ctx, authz, &attrs)
	switch {
	case decision == authorizer.DecisionAllow:
		return nil
	case errors.Is(err, errNoUser):
		return apierrors.NewInternalError(err)
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

// Allowed says whether the request's user may do attrs; a failed check
// counts as no (ask AuthorizeQuestion for what the caller needs, which
// answers the failure).
func Allowed(ctx context.Context, authz authorizer.UnconditionalAuthorizer, attrs authorizer.AttributesRecord) bool {
	decision, _, err := authorizeUser(ctx, authz, &attrs)
	return err == nil && decision == authorizer.DecisionAllow
}

var errNoUser = errors.New("the request carries no user to authorize the question for")

// authorizeUser asks authz about attrs for the request's user, setting it
// in attrs.
func authorizeUser(ctx context.Context, authz authorizer.UnconditionalAuthorizer, attrs *authorizer.AttributesRecord) (authorizer.Decision, string, error) {
	user, ok := request.UserFrom(ctx)
	if !ok {
		return authorizer.DecisionNoOpinion, "", errNoUser
	}
	attrs.User = user
	return authz.Authorize(ctx, attrs)
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

// BadQuestion is a query kind's 400 for a question that cannot be
// answered, with the causes (as for a bad selector or window of a list):
// the create of a report is a question, not an object that is invalid.
func BadQuestion(kind schema.GroupKind, name string, errs field.ErrorList) error {
	err := apierrors.NewInvalid(kind, name, errs)
	err.ErrStatus.Code, err.ErrStatus.Reason = http.StatusBadRequest, metav1.StatusReasonBadRequest
	return err
}

// Admit runs the create's admission check (the generic server's
// createValidation, if any) on a copy of the report.
func Admit(ctx context.Context, createValidation rest.ValidateObjectFunc, obj runtime.Object) error {
	if createValidation == nil {
		return nil
	}
	return createValidation(ctx, obj.DeepCopyObject())
}
