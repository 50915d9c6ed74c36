package registry

import (
	"context"
	"fmt"
	"strconv"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"

	"github.com/example/platform-apiserver/pkg/registry/store"
)

// StoreListOptions converts Kubernetes list options into store list options.
// The request namespace, when set, becomes a requirement on the field
// metadata.namespace. matchesNothing is true when the label selector can
// select nothing, in which case the list is empty without asking the store.
// Options beyond limits are refused with 400, and a limit above the page
// size is served as the page size.
func StoreListOptions(ctx context.Context, opts *metainternalversion.ListOptions, fields Fields, limits Limits) (so store.ListOptions, matchesNothing bool, err error) {
	if ns, ok := genericapirequest.NamespaceFrom(ctx); ok && ns != metav1.NamespaceAll {
		f, ok := fields.Lookup("metadata.namespace")
		if !ok {
			return so, false, apierrors.NewBadRequest(fields.kind + " is not namespaced; list it without a namespace")
		}
		if err := CheckRequestText("the namespace", ns); err != nil {
			return so, false, err
		}
		so.Fields = append(so.Fields, store.FieldRequirement{Field: f, Op: selection.Equals, Value: ns})
	}
	if opts == nil {
		so.Freshness.Latest = true
		return so, false, nil
	}
	if err := limits.CheckListOptions(opts); err != nil {
		return so, false, err
	}
	so.Limit = limits.pageSize(opts.Limit)
	so.Continue = opts.Continue
	switch rv := opts.ResourceVersion; rv {
	case "":
		so.Freshness.Latest = opts.Continue == "" // a continue token carries its own
	case "0":
	default:
		v, err := ParseResourceVersion(rv)
		if err != nil {
			return so, false, err
		}
		so.Freshness.AtLeast = v
	}

	if opts.LabelSelector != nil {
		reqs, selectable := opts.LabelSelector.Requirements()
		if !selectable {
			return so, true, nil
		}
		so.Labels = reqs
	}
	if opts.FieldSelector != nil {
		for _, r := range opts.FieldSelector.Requirements() {
			req, err := fields.Requirement(r.Field, r.Operator, r.Value)
			if err != nil {
				return so, false, err
			}
			so.Fields = append(so.Fields, req)
		}
	}
	return so, false, nil
}

// CheckListResourceVersion applies the list resourceVersion semantics of
// Kubernetes against the registry resourceVersion a list was served at:
// unset or "0" accept anything; NotOlderThan (the default) needs the registry
// to have reached the requested version; Exact needs it to be the served one,
// since the registry keeps no older snapshots.
func CheckListResourceVersion(opts *metainternalversion.ListOptions, served int64) error {
	if opts == nil || opts.ResourceVersion == "" || opts.ResourceVersion == "0" {
		return nil
	}
	requested, err := ParseResourceVersion(opts.ResourceVersion)
	if err != nil {
		return err
	}
	if requested > served {
		return tooLargeResourceVersion(requested, served)
	}
	if opts.ResourceVersionMatch == metav1.ResourceVersionMatchExact && requested != served {
		// 410 Expired, as kube-apiserver answers for a compacted one.
		return apierrors.NewResourceExpired(fmt.Sprintf(
			"resourceVersion %d is not retained for exact reads (current is %d); list without resourceVersionMatch=Exact", requested, served))
	}
	return nil
}

// tooLargeResourceVersion is what kube-apiserver answers a read from a
// resourceVersion it has not reached (storage.NewTooLargeResourceVersionError):
// 504 Timeout with a cause clients retry on, and Retry-After: 1.
func tooLargeResourceVersion(requested, current int64) error {
	err := apierrors.NewTimeoutError(fmt.Sprintf("Too large resource version: %d, current: %d", requested, current), 1)
	err.ErrStatus.Details.Causes = []metav1.StatusCause{{Type: metav1.CauseTypeResourceVersionTooLarge, Message: "Too large resource version"}}
	return err
}

// ParseResourceVersion parses a registry resourceVersion, answering 400 for
// anything that is not one.
func ParseResourceVersion(rv string) (int64, error) {
	v, err := strconv.ParseInt(rv, 10, 64)
	if err != nil || v < 0 {
		return 0, apierrors.NewBadRequest(fmt.Sprintf("invalid resourceVersion %q: expected a non-negative integer", rv))
	}
	return v, nil
}

// List runs one kind's list: the request's options become store options,
// the store answers, and the resourceVersion semantics are checked. A label
// selector that can match nothing yields an empty page without a query.
func List[R any](ctx context.Context, options *metainternalversion.ListOptions, fields Fields, limits Limits, resource schema.GroupResource,
	list func(context.Context, store.ListOptions) (*store.Page[R], error)) (*store.Page[R], error) {
	opts, nothing, err := StoreListOptions(ctx, options, fields, limits)
	if err != nil {
		return nil, err
	}
	if nothing {
		return &store.Page[R]{}, nil
	}
	page, err := list(ctx, opts)
	if err != nil {
		return nil, APIError(err, resource, "")
	}
	if err := CheckListResourceVersion(options, page.ResourceVersion); err != nil {
		return nil, err
	}
	return page, nil
}

// ListMeta is the list metadata of a page.
func ListMeta[R any](page *store.Page[R]) metav1.ListMeta {
	m := metav1.ListMeta{Continue: page.Continue, RemainingItemCount: page.RemainingItemCount}
	if page.ResourceVersion > 0 {
		m.ResourceVersion = strconv.FormatInt(page.ResourceVersion, 10)
	}
	return m
}
