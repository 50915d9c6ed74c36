package registry

import (
	"context"
	"errors"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/example/platform-apiserver/pkg/registry/store"
)

// Messages of the requests the database refused, in our words: the
// database's own text names its internals, not what the client should fix.
const (
	rejectedMessage = "the registry cannot compare a value of this request with what it stores: names, namespaces, " +
		"selector values and query fields must be UTF-8 text without NUL characters, and numbers within range; correct the value and retry"
	tooComplexMessage = "the registry cannot evaluate a request this complex: select with fewer requirements or values"
)

// APIError translates a store error into the Kubernetes status error a client
// should see. It is the only place the API layer maps storage failures. A
// request the database refuses (a data exception, a program limit) is the
// client's to fix: 400 in our words, never the database's.
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
	case errors.Is(err, store.ErrBusy):
		retry := 1
		if busy, ok := errors.AsType[*store.BusyError](err); ok {
			retry = busy.RetryAfterSeconds
		}
		return apierrors.NewTooManyRequests(err.Error()+"; retry", retry)
	case errors.Is(err, store.ErrUnavailable):
		return apierrors.NewServiceUnavailable(err.Error())
	case errors.Is(err, store.ErrInvalidSelector):
		return apierrors.NewBadRequest(err.Error())
	case errors.Is(err, store.ErrRejected):
		return apierrors.NewBadRequest(rejectedMessage)
	case errors.Is(err, store.ErrTooComplex):
		return apierrors.NewBadRequest(tooComplexMessage)
	case errors.Is(err, store.ErrTimeout), errors.Is(err, context.DeadlineExceeded):
		// The request's deadline, or a statement PostgreSQL cancelled.
		return apierrors.NewTimeoutError("the registry did not answer in time: "+err.Error(), 1)
	default:
		return apierrors.NewInternalError(err)
	}
}

// QueryError is APIError for a query kind's answer (a PlacementReport, a
// UsageReport): a query that ran past its time is a 504 without
// Retry-After, since client-go would send the same query again up to ten
// times and multiply the load that made it slow.
func QueryError(err error, resource schema.GroupResource, name string) error {
	if errors.Is(err, store.ErrTimeout) || errors.Is(err, context.DeadlineExceeded) {
		return apierrors.NewTimeoutError("the registry did not answer the query in time: ask about fewer members or nodes, or a simpler shape: "+err.Error(), 0)
	}
	return APIError(err, resource, name)
}
