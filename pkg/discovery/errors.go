package discovery

import (
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/example/platform-apiserver/pkg/registry/store"
)

// storeError marks a failure of the registry (as opposed to the member).
type storeError struct{ err error }

func (e storeError) Error() string { return e.err.Error() }
func (e storeError) Unwrap() error { return e.err }

// decodeError marks an object the worker could not read.
type decodeError struct{ err error }

func (e decodeError) Error() string { return e.err.Error() }
func (e decodeError) Unwrap() error { return e.err }

// errorReason names err's cause for logs and the errors metric.
func errorReason(err error) string {
	var se storeError
	var de decodeError
	switch {
	case errors.As(err, &se):
		if errors.Is(err, store.ErrUnavailable) {
			return "store_unavailable"
		}
		return "store"
	case errors.As(err, &de):
		return "decode"
	case apierrors.IsForbidden(err):
		return "forbidden"
	case apierrors.IsUnauthorized(err):
		return "unauthorized"
	default:
		return "member_unavailable"
	}
}

// isExpired reports a 410: the member no longer has history back to the cursor.
func isExpired(err error) bool {
	return apierrors.IsResourceExpired(err) || apierrors.IsGone(err)
}

// isTooLargeResourceVersion reports that the member does not have the
// requested resourceVersion yet (its watch cache waited and gave up), as
// client-go's reflector tells it: by the status cause, which every
// supported Kubernetes version sets.
func isTooLargeResourceVersion(err error) bool {
	return apierrors.HasStatusCause(err, metav1.CauseTypeResourceVersionTooLarge)
}

// watchError turns a watch ERROR event's object into an error.
func watchError(obj runtime.Object) error {
	if obj == nil {
		return errors.New("watch error event without a status")
	}
	err := apierrors.FromObject(obj)
	if _, ok := err.(apierrors.APIStatus); !ok {
		return decodeError{fmt.Errorf("watch error event: %w", err)}
	}
	return err
}
