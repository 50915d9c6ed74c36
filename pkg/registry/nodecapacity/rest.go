// Package nodecapacity serves NodeCapacity, the per-node view of capacity,
// requests, usage and schedulability, read-only from the registry.
package nodecapacity

import (
	"context"
	"strings"

	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/example/platform-apiserver/pkg/apis/platform"
	"github.com/example/platform-apiserver/pkg/registry"
	"github.com/example/platform-apiserver/pkg/registry/store"
)

// Reader is the part of the registry store NodeCapacity is served from.
type Reader interface {
	GetNodeCapacity(ctx context.Context, clusterID, node string) (*store.NodeCapacity, error)
	ListNodeCapacities(ctx context.Context, opts store.ListOptions) (*store.Page[store.NodeCapacity], error)
	StreamNodeCapacities(ctx context.Context, opts store.ListOptions, pageSize int, yield func(rv int64, page []store.NodeCapacity) error) error
}

var fieldMap = registry.FieldMap{
	"metadata.name":      store.FieldName,
	"status.cluster":     store.FieldCluster,
	"status.nodeName":    store.FieldNodeName,
	"status.schedulable": store.FieldSchedulable,
}

// REST implements a read-only (get, list, watch) RESTStorage for NodeCapacity; the verbs it does
// not implement (create, update, patch, delete) answer 405.
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

// NewREST returns the NodeCapacity storage over a registry reader.
func NewREST(r Reader, w registry.WatchConfig) *REST {
	return &REST{reader: r, watch: w, TableConvertor: tableConvertor}
}

func (r *REST) New() runtime.Object     { return &platform.NodeCapacity{} }
func (r *REST) NewList() runtime.Object { return &platform.NodeCapacityList{} }
func (r *REST) Destroy()                {}
func (r *REST) NamespaceScoped() bool   { return false }
func (r *REST) GetSingularName() string { return "nodecapacity" }
func (r *REST) ShortNames() []string    { return []string{"nc", "nodecap"} }
func (r *REST) Categories() []string    { return []string{"platform"} }

// Get returns the NodeCapacity named <cluster>.<node>.
func (r *REST) Get(ctx context.Context, name string, _ *metav1.GetOptions) (runtime.Object, error) {
	cluster, node, ok := SplitName(name)
	if !ok {
		return nil, registry.APIError(store.ErrNotFound, platform.Resource("nodecapacities"), name)
	}
	nc, err := r.reader.GetNodeCapacity(ctx, cluster, node)
	if err != nil {
		return nil, registry.APIError(err, platform.Resource("nodecapacities"), name)
	}
	obj := ToObject(nc)
	return &obj, nil
}

// List returns the NodeCapacities matching the options, one page at a time
// when a limit is given.
func (r *REST) List(ctx context.Context, options *metainternalversion.ListOptions) (runtime.Object, error) {
	page, err := registry.List(ctx, options, fieldMap, platform.Resource("nodecapacities"), r.reader.ListNodeCapacities)
	if err != nil {
		return nil, err
	}
	list := &platform.NodeCapacityList{ListMeta: registry.ListMeta(page)}
	list.Items = make([]platform.NodeCapacity, len(page.Items))
	for i := range page.Items {
		list.Items[i] = ToObject(&page.Items[i])
	}
	return list, nil
}

// Name is the object name of a member node: <cluster id>.<node name>.
func Name(clusterID, node string) string { return clusterID + "." + node }

// SplitName splits an object name at its first dot; a cluster id is a DNS
// label and so holds none.
func SplitName(name string) (clusterID, node string, ok bool) {
	clusterID, node, ok = strings.Cut(name, ".")
	return clusterID, node, ok && clusterID != "" && node != ""
}
