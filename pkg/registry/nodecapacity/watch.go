package nodecapacity

import (
	"context"
	"strconv"

	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/example/platform-apiserver/pkg/apis/platform"
	"github.com/example/platform-apiserver/pkg/registry"
	"github.com/example/platform-apiserver/pkg/registry/store"
)

// Watch streams NodeCapacity changes with Kubernetes watch semantics.
func (r *REST) Watch(ctx context.Context, options *metainternalversion.ListOptions) (watch.Interface, error) {
	return registry.Watch(ctx, r.watch, registry.WatchSpec{
		Kind:     store.KindNodeCapacity,
		Resource: platform.Resource("nodecapacities"),
		Fields:   fieldMap,
		Convert: registry.ConvertChange(func(c *store.Change) (cur, prev *store.NodeCapacity) {
			return c.NodeCapacity, c.PrevNodeCapacity
		}, ToObject),
		Stream:    registry.StreamObjects(r.reader.StreamNodeCapacities, ToObject),
		NewObject: r.New,
		Attrs:     Attrs,
		Key: func(c *store.Change) registry.ChangeKey {
			return registry.ChangeKey{Name: Name(c.NodeCapacity.ClusterID, c.NodeCapacity.Node.Name), Cluster: c.NodeCapacity.ClusterID}
		},
	}, options)
}

// Attrs returns the labels and the field-selector values of a NodeCapacity.
func Attrs(obj runtime.Object) (labels.Set, fields.Set) {
	nc := obj.(*platform.NodeCapacity)
	return nc.Labels, fields.Set{
		"metadata.name":      nc.Name,
		"status.cluster":     nc.Status.Cluster,
		"status.nodeName":    nc.Status.NodeName,
		"status.schedulable": strconv.FormatBool(nc.Status.Schedulable),
	}
}
