package discovery

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/example/platform-apiserver/pkg/registry/store"
)

// A resource, in this package, is a member resource discovery mirrors;
// store.Resource is its name. memberResource declares one: how its objects
// are listed and watched (in every namespace, with the typed client, no
// informer cache: each object is dropped once converted), how one becomes
// its store record, and the store.Batch slot its records go to.
type memberResource struct {
	name  store.Resource
	list  func(ctx context.Context, c kubernetes.Interface, opts metav1.ListOptions) (runtime.Object, error)
	watch func(ctx context.Context, c kubernetes.Interface, opts metav1.ListOptions) (watch.Interface, error)
	// convert turns an existing object into its store record; a nil
	// record means the object's row must go (a terminal pod).
	convert func(obj runtime.Object) (rec any, issues []issue, err error)
	// put adds a record convert returned to a batch.
	put func(b *store.Batch, rec any)
	// optional: a member may not serve the resource (404: its API group
	// or version is not enabled) or may not let discovery read it (403).
	// Either is recorded as the resource's store.APIState (Batch.Unserved)
	// instead of a failure, and asked again every Sync.UnservedRecheck.
	optional bool
	// group is the resource's API group ("" for the core group).
	group string
	// after names the member rows whose first sync a relist of this
	// resource waits for (see syncer.awaitFirstSyncs): the view rows it
	// writes are then stamped once, with their aggregates, instead of again
	// when those rows' relist ends.
	after []store.Resource
}

// memberResources are the resources every worker mirrors. Adding one is an
// entry here, its converter, its slot in store.Batch and the registry's
// apply of it (postgres memberTables).
var memberResources = []memberResource{
	after(declare(store.ResourceNamespaces,
		func(c kubernetes.Interface) listWatcher[*corev1.NamespaceList] { return c.CoreV1().Namespaces() },
		always(convertNamespace),
		func(b *store.Batch) *[]store.Namespace { return &b.Namespaces }), store.ResourcePods, store.ResourceResourceQuotas),
	after(declare(store.ResourceNodes,
		func(c kubernetes.Interface) listWatcher[*corev1.NodeList] { return c.CoreV1().Nodes() },
		always(convertNode),
		func(b *store.Batch) *[]store.Node { return &b.Nodes }), store.ResourcePods),
	declare(store.ResourcePods,
		func(c kubernetes.Interface) listWatcher[*corev1.PodList] { return c.CoreV1().Pods(metav1.NamespaceAll) },
		convertPod,
		func(b *store.Batch) *[]store.Pod { return &b.Pods }),
	declare(store.ResourceResourceQuotas,
		func(c kubernetes.Interface) listWatcher[*corev1.ResourceQuotaList] {
			return c.CoreV1().ResourceQuotas(metav1.NamespaceAll)
		},
		func(q *corev1.ResourceQuota) (store.Quota, bool, []issue) { return convertQuota(q), true, nil },
		func(b *store.Batch) *[]store.Quota { return &b.Quotas }),
	// DRA (resource.k8s.io/v1, Kubernetes 1.34+): optional, as older
	// members and those with the API disabled do not serve it.
	optional(resourcev1.GroupName, declare(store.ResourceResourceSlices,
		func(c kubernetes.Interface) listWatcher[*resourcev1.ResourceSliceList] {
			return c.ResourceV1().ResourceSlices()
		},
		always(convertResourceSlice),
		func(b *store.Batch) *[]store.ResourceSlice { return &b.Slices })),
	optional(resourcev1.GroupName, declare(store.ResourceResourceClaims,
		func(c kubernetes.Interface) listWatcher[*resourcev1.ResourceClaimList] {
			return c.ResourceV1().ResourceClaims(metav1.NamespaceAll)
		},
		always(convertResourceClaim),
		func(b *store.Batch) *[]store.ResourceClaim { return &b.Claims })),
}

// after makes r's relists wait for the first sync of rows (memberResource.after).
func after(r memberResource, rows ...store.Resource) memberResource {
	r.after = rows
	return r
}

// optional marks r optional, of API group group (memberResource.optional).
func optional(group string, r memberResource) memberResource {
	r.optional, r.group = true, group
	return r
}

// listWatcher is the part of a typed client of one resource discovery uses.
type listWatcher[L runtime.Object] interface {
	List(ctx context.Context, opts metav1.ListOptions) (L, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}

// declare declares the member resource name: client picks its typed client,
// convert turns an object of type T into its record R (ok false: the row
// must go) and slot is the batch's slice of Rs.
func declare[T, L runtime.Object, R any](
	name store.Resource,
	client func(kubernetes.Interface) listWatcher[L],
	convert func(T) (rec R, ok bool, issues []issue),
	slot func(*store.Batch) *[]R,
) memberResource {
	return memberResource{
		name: name,
		list: func(ctx context.Context, c kubernetes.Interface, opts metav1.ListOptions) (runtime.Object, error) {
			return client(c).List(ctx, opts)
		},
		watch: func(ctx context.Context, c kubernetes.Interface, opts metav1.ListOptions) (watch.Interface, error) {
			return client(c).Watch(ctx, opts)
		},
		convert: func(obj runtime.Object) (any, []issue, error) {
			t, ok := obj.(T)
			if !ok {
				return nil, nil, fmt.Errorf("unexpected object type %T", obj)
			}
			rec, ok, issues := convert(t)
			if !ok {
				return nil, issues, nil
			}
			return rec, issues, nil
		},
		put: func(b *store.Batch, rec any) {
			s := slot(b)
			*s = append(*s, rec.(R))
		},
	}
}

// always adapts a converter whose objects always have a row.
func always[T, R any](convert func(T) (R, []issue)) func(T) (R, bool, []issue) {
	return func(obj T) (R, bool, []issue) {
		rec, issues := convert(obj)
		return rec, true, issues
	}
}
