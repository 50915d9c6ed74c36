package clusternamespace

import (
	"context"

	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/example/platform-apiserver/pkg/apis/platform"
	"github.com/example/platform-apiserver/pkg/registry"
	"github.com/example/platform-apiserver/pkg/registry/store"
)

// Watch streams ClusterNamespace changes with Kubernetes watch semantics.
func (r *REST) Watch(ctx context.Context, options *metainternalversion.ListOptions) (watch.Interface, error) {
	return registry.Watch(ctx, r.watch, registry.WatchSpec{
		Kind:      store.KindClusterNamespace,
		Resource:  platform.Resource("clusternamespaces"),
		Fields:    fieldMap,
		Convert:   convertChange,
		List:      r.listObjects,
		NewObject: r.New,
		Attrs:     Attrs,
	}, options)
}

func convertChange(c *store.Change) (obj, prev runtime.Object) {
	cur := ToObject(c.ClusterNamespace)
	obj = &cur
	if c.PrevClusterNamespace != nil {
		p := ToObject(c.PrevClusterNamespace)
		prev = &p
	}
	return obj, prev
}

func (r *REST) listObjects(ctx context.Context, opts store.ListOptions) ([]runtime.Object, int64, error) {
	page, err := r.reader.ListClusterNamespaces(ctx, opts)
	if err != nil {
		return nil, 0, err
	}
	objs := make([]runtime.Object, len(page.Items))
	for i := range page.Items {
		obj := ToObject(&page.Items[i])
		objs[i] = &obj
	}
	return objs, page.ResourceVersion, nil
}

// Attrs returns the labels and the field-selector values of a ClusterNamespace.
func Attrs(obj runtime.Object) (labels.Set, fields.Set) {
	cn := obj.(*platform.ClusterNamespace)
	return cn.Labels, fields.Set{
		"metadata.name":      cn.Name,
		"metadata.namespace": cn.Namespace,
		"status.cluster":     cn.Status.Cluster,
		"status.phase":       string(cn.Status.Phase),
	}
}
