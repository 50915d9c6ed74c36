// Package clusternamespace serves ClusterNamespace, the per-namespace view of
// member clusters, read-only from the registry. An object lives in the
// namespace it describes and is named after its cluster, so ordinary
// namespaced RBAC scopes tenant teams.
package clusternamespace

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/example/platform-apiserver/pkg/apis/platform"
	"github.com/example/platform-apiserver/pkg/registry"
	"github.com/example/platform-apiserver/pkg/registry/store"
)

// Reader is the part of the registry store ClusterNamespace is served from.
type Reader interface {
	GetClusterNamespace(ctx context.Context, namespace, clusterID string) (*store.ClusterNamespace, error)
	ListClusterNamespaces(ctx context.Context, opts store.ListOptions) (*store.Page[store.ClusterNamespace], error)
	StreamClusterNamespaces(ctx context.Context, opts store.ListOptions, pageSize int, yield func(rv int64, page []store.ClusterNamespace) error) error
}

var fieldMap = registry.FieldMap{
	"metadata.name":      store.FieldName,
	"metadata.namespace": store.FieldNamespace,
	"status.cluster":     store.FieldCluster,
	"status.phase":       store.FieldPhase,
}

// REST implements a read-only (get, list, watch) RESTStorage for ClusterNamespace; the verbs it
// does not implement (create, update, patch, delete) answer 405.
type REST struct {
	reader Reader
	watch  registry.WatchConfig
	registry.TableConvertor
}

var (
	_ rest.Storage              = &REST{}
	_ rest.Scoper               = &REST{}
	_ rest.Getter               = &REST{}
	_ rest.Lister               = &REST{}
	_ rest.Watcher              = &REST{}
	_ rest.TableConvertor       = &REST{}
	_ rest.ShortNamesProvider   = &REST{}
	_ rest.CategoriesProvider   = &REST{}
	_ rest.SingularNameProvider = &REST{}
)

// NewREST returns the ClusterNamespace storage over a registry reader.
func NewREST(r Reader, w registry.WatchConfig) *REST {
	return &REST{reader: r, watch: w, TableConvertor: tableConvertor}
}

func (r *REST) New() runtime.Object     { return &platform.ClusterNamespace{} }
func (r *REST) NewList() runtime.Object { return &platform.ClusterNamespaceList{} }
func (r *REST) Destroy()                {}
func (r *REST) NamespaceScoped() bool   { return true }
func (r *REST) GetSingularName() string { return "clusternamespace" }
func (r *REST) ShortNames() []string    { return []string{"cns", "clusterns"} }
func (r *REST) Categories() []string    { return []string{"platform"} }

// Get returns the view of the request namespace in the cluster named name.
func (r *REST) Get(ctx context.Context, name string, _ *metav1.GetOptions) (runtime.Object, error) {
	ns, ok := genericapirequest.NamespaceFrom(ctx)
	if !ok || ns == "" {
		return nil, apierrors.NewBadRequest("a namespace is required to get a clusternamespace")
	}
	cn, err := r.reader.GetClusterNamespace(ctx, ns, name)
	if err != nil {
		return nil, registry.APIError(err, platform.Resource("clusternamespaces"), name)
	}
	obj := ToObject(cn)
	return &obj, nil
}

// List returns the ClusterNamespaces matching the options in the request
// namespace (all namespaces for -A), one page at a time when a limit is given.
func (r *REST) List(ctx context.Context, options *metainternalversion.ListOptions) (runtime.Object, error) {
	page, err := registry.List(ctx, options, fieldMap, platform.Resource("clusternamespaces"), r.reader.ListClusterNamespaces)
	if err != nil {
		return nil, err
	}
	list := &platform.ClusterNamespaceList{ListMeta: registry.ListMeta(page)}
	list.Items = make([]platform.ClusterNamespace, len(page.Items))
	for i := range page.Items {
		list.Items[i] = ToObject(&page.Items[i])
	}
	return list, nil
}
