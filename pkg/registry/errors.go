package registry

import (
	"context"
	"errors"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/example/platform-apiserver/pkg/registry/store"
)

// APIError translates a store error into the Kubernetes status error a client
// should see. It is the only place the API layer maps storage failures.
func APIError(err error, resource schema.GroupResource, name string) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, store.ErrNotFound):
		return apierrors.NewNotFound(resource, name)
	case errors.Is(err, store.ErrInvalidContinue):
		return apierrors.NewBadRequest(err.Error())
	case errors.Is(err, store.ErrExpiredContinue):
		return apierrors.NewResourceExpired(err.Error() + "; restart the list without continue")
	case errors.Is(err, store.ErrUnavailable):
		return apierrors.NewServiceUnavailable(err.Error())
	case errors.Is(err, store.ErrInvalidSelector):
		return apierrors.NewBadRequest(err.Error())
	case errors.Is(err, store.ErrTimeout), errors.Is(err, context.DeadlineExceeded):
		// The request's deadline, or a statement PostgreSQL cancelled.
		return apierrors.NewTimeoutError("the registry did not answer in time: "+err.Error(), 1)
	default:
		return apierrors.NewInternalError(err)
	}
}
