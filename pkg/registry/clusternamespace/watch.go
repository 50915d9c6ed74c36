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
		Kind:     store.KindClusterNamespace,
		Resource: platform.Resource("clusternamespaces"),
		Fields:   fieldMap,
		Convert: registry.ConvertChange(func(c *store.Change) (cur, prev *store.ClusterNamespace) {
			return c.ClusterNamespace, c.PrevClusterNamespace
		}, ToObject),
		Stream:    registry.StreamObjects(r.reader.StreamClusterNamespaces, ToObject),
		NewObject: r.New,
		Attrs:     Attrs,
		Key: func(c *store.Change) registry.ChangeKey {
			cn := c.ClusterNamespace
			return registry.ChangeKey{Namespace: cn.Namespace.Name, Name: cn.ClusterID, Cluster: cn.ClusterID}
		},
	}, options)
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
