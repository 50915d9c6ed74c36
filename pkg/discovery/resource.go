package discovery

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/example/platform-apiserver/pkg/registry/store"
)

// allResources are the member resources every worker mirrors.
var allResources = []store.Resource{
	store.ResourceNamespaces, store.ResourceNodes, store.ResourcePods, store.ResourceResourceQuotas,
}

// source lists, watches and records one kind of member object with the typed
// client directly: no informer cache, each object is dropped once converted.
type source struct {
	resource store.Resource
	list     func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error)
	watch    func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
	// convert turns an existing object into its store record; a nil record
	// means the object's row must go (a terminal pod).
	convert func(obj runtime.Object) (rec any, issues []issue, err error)
}

func sourceFor(client kubernetes.Interface, r store.Resource) source {
	core := client.CoreV1()
	switch r {
	case store.ResourceNamespaces:
		return source{
			resource: r,
			list: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
				return core.Namespaces().List(ctx, o)
			},
			watch: core.Namespaces().Watch,
			convert: typed(func(ns *corev1.Namespace) (any, []issue) {
				rec, issues := convertNamespace(ns)
				return rec, issues
			}),
		}
	case store.ResourceNodes:
		return source{
			resource: r,
			list: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
				return core.Nodes().List(ctx, o)
			},
			watch: core.Nodes().Watch,
			convert: typed(func(n *corev1.Node) (any, []issue) {
				rec, issues := convertNode(n)
				return rec, issues
			}),
		}
	case store.ResourcePods:
		return source{
			resource: r,
			list: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
				return core.Pods(metav1.NamespaceAll).List(ctx, o)
			},
			watch: core.Pods(metav1.NamespaceAll).Watch,
			convert: typed(func(p *corev1.Pod) (any, []issue) {
				rec, ok, issues := convertPod(p)
				if !ok {
					return nil, issues
				}
				return rec, issues
			}),
		}
	case store.ResourceResourceQuotas:
		return source{
			resource: r,
			list: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
				return core.ResourceQuotas(metav1.NamespaceAll).List(ctx, o)
			},
			watch: core.ResourceQuotas(metav1.NamespaceAll).Watch,
			convert: typed(func(q *corev1.ResourceQuota) (any, []issue) {
				return convertQuota(q), nil
			}),
		}
	}
	panic(fmt.Sprintf("discovery: no source for resource %q", r)) // allResources is fixed
}

// typed adapts a converter of one object type to runtime.Object.
func typed[T runtime.Object](fn func(T) (any, []issue)) func(runtime.Object) (any, []issue, error) {
	return func(obj runtime.Object) (any, []issue, error) {
		t, ok := obj.(T)
		if !ok {
			return nil, nil, fmt.Errorf("unexpected object type %T", obj)
		}
		rec, issues := fn(t)
		return rec, issues, nil
	}
}
