package registry

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/storage"

	"github.com/example/platform-apiserver/pkg/registry/store"
)

// APIObject is a pointer to an internal API object type O.
type APIObject[O any] interface {
	*O
	runtime.Object
	metav1.Object
}

// REST is the read-only storage of one kind (get, list, watch, tables);
// the verbs it does not implement (create, update, patch, delete) answer
// 405.
type REST[R, O any, P APIObject[O]] struct {
	kind   *Kind[R, O]
	fields Fields
	source store.Source[R]
	watch  WatchConfig
	spec   WatchSpec // what every watch of the kind shares
	TableConvertor
}

// NewREST returns the storage of kind k over src, whose watches follow
// src.Kind in the change feed; it panics if k is declared incompletely or
// src names no kind (a programming error).
func NewREST[R, O any, P APIObject[O]](k *Kind[R, O], src store.Source[R], w WatchConfig) *REST[R, O, P] {
	if err := k.Validate(); err != nil {
		panic(err)
	}
	if src.Kind == "" {
		panic(fmt.Sprintf("the source of %s names no kind in the change feed", k.Kind))
	}
	r := &REST[R, O, P]{
		kind: k, fields: k.FieldTable(), source: src, watch: w,
		TableConvertor: k.table(func(obj runtime.Object) (*O, error) {
			o, ok := obj.(P)
			if !ok {
				return nil, fmt.Errorf("expected %T, got %T", P(nil), obj)
			}
			return o, nil
		}),
	}
	r.spec = WatchSpec{
		Kind:      src.Kind,
		Resource:  k.GroupResource(),
		Fields:    r.fields,
		Convert:   ConvertChange[R, O, P](k.ToObject),
		Stream:    StreamObjects[R, O, P](src.Stream, src.Key, k.ToObject),
		NewObject: r.New,
		Attrs: func(obj runtime.Object) (labels.Set, fields.Fields) {
			o := obj.(P)
			return o.GetLabels(), k.FieldValues(o)
		},
		Key: func(c *store.Change) ChangeKey {
			cur, _ := store.Records[R](c)
			return k.Key(cur)
		},
		ListKey: func(c *store.Change) store.ListKey {
			cur, _ := store.Records[R](c)
			return src.Key(cur)
		},
	}
	return r
}

func (r *REST[R, O, P]) New() runtime.Object     { return P(new(O)) }
func (r *REST[R, O, P]) NewList() runtime.Object { return r.kind.NewList(nil) }
func (r *REST[R, O, P]) Destroy()                {}
func (r *REST[R, O, P]) NamespaceScoped() bool   { return r.kind.Namespaced }
func (r *REST[R, O, P]) GetSingularName() string { return r.kind.Singular }
func (r *REST[R, O, P]) ShortNames() []string    { return r.kind.ShortNames }
func (r *REST[R, O, P]) Categories() []string    { return r.kind.Categories }

// Get returns the object named name (in the request namespace for a
// namespaced kind).
func (r *REST[R, O, P]) Get(ctx context.Context, name string, _ *metav1.GetOptions) (runtime.Object, error) {
	ns, _ := genericapirequest.NamespaceFrom(ctx)
	if r.kind.Namespaced && ns == "" {
		return nil, apierrors.NewBadRequest("a namespace is required to get a " + r.kind.Singular)
	}
	if err := CheckRequestText("the name", name); err != nil {
		return nil, err
	}
	if err := CheckRequestText("the namespace", ns); err != nil {
		return nil, err
	}
	rec, err := r.source.Get(ctx, ns, name)
	if err != nil {
		return nil, APIError(err, r.kind.GroupResource(), name)
	}
	obj := r.kind.ToObject(rec)
	return P(&obj), nil
}

// List returns the objects matching the options (in the request namespace
// for a namespaced kind, every namespace for -A), one page at a time when a
// limit is given.
func (r *REST[R, O, P]) List(ctx context.Context, options *metainternalversion.ListOptions) (runtime.Object, error) {
	page, err := List(ctx, options, r.fields, r.watch.Limits, r.kind.GroupResource(), r.source.List)
	if storage.IsTooLargeResourceVersion(err) && r.watch.Follower != nil {
		// As kube-apiserver's watch cache: wait briefly for the version
		// (the change feed reads the same registry), then list once more.
		requested, _ := ParseResourceVersion(options.ResourceVersion)
		if err = awaitResourceVersion(ctx, r.watch.Follower, requested); err == nil {
			page, err = List(ctx, options, r.fields, r.watch.Limits, r.kind.GroupResource(), r.source.List)
		}
	}
	if err != nil {
		return nil, err
	}
	items := make([]O, len(page.Items))
	for i := range page.Items {
		items[i] = r.kind.ToObject(&page.Items[i])
	}
	list := r.kind.NewList(items)
	lm, err := meta.ListAccessor(list)
	if err != nil {
		return nil, err
	}
	m := ListMeta(page)
	lm.SetResourceVersion(m.ResourceVersion)
	lm.SetContinue(m.Continue)
	lm.SetRemainingItemCount(m.RemainingItemCount)
	return list, nil
}

// Watch streams the kind's changes with Kubernetes watch semantics.
func (r *REST[R, O, P]) Watch(ctx context.Context, options *metainternalversion.ListOptions) (watch.Interface, error) {
	return Watch(ctx, r.watch, r.spec, options)
}
