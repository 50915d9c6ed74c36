// Package clusternamespace serves ClusterNamespace, the per-namespace view of
// member clusters, read-only from the registry. An object lives in the
// namespace it describes and is named after its cluster, so ordinary
// namespaced RBAC scopes tenant teams.
package clusternamespace

import (
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/example/platform-apiserver/pkg/apis/platform"
	"github.com/example/platform-apiserver/pkg/registry"
	"github.com/example/platform-apiserver/pkg/registry/store"
)

// Kind declares ClusterNamespace: names, selectable fields, conversion and
// table (see registry.Kind).
var Kind = &registry.Kind[store.ClusterNamespace, platform.ClusterNamespace]{
	Kind: "ClusterNamespace", Resource: "clusternamespaces", Singular: "clusternamespace",
	ShortNames: []string{"cns", "clusterns"}, Categories: []string{"platform"},
	Namespaced: true,
	Fields: []registry.Field[platform.ClusterNamespace]{
		{Path: "metadata.name", Value: func(o *platform.ClusterNamespace) string { return o.Name }, Columns: []string{"cluster_id"}},
		{Path: "metadata.namespace", Value: func(o *platform.ClusterNamespace) string { return o.Namespace }, Columns: []string{"name"}},
		{Path: "status.cluster", Value: func(o *platform.ClusterNamespace) string { return o.Status.Cluster }, Columns: []string{"cluster_id"}},
		{Path: "status.phase", Value: func(o *platform.ClusterNamespace) string { return string(o.Status.Phase) }, Columns: []string{"phase"}},
	},
	ToObject: ToObject,
	NewList: func(items []platform.ClusterNamespace) runtime.Object {
		return &platform.ClusterNamespaceList{Items: items}
	},
	Key: func(cn *store.ClusterNamespace) registry.ChangeKey {
		return registry.ChangeKey{Namespace: cn.Namespace.Name, Name: cn.ClusterID, Cluster: cn.ClusterID}
	},
	Columns: columns,
}

// REST is the ClusterNamespace storage.
type REST = registry.REST[store.ClusterNamespace, platform.ClusterNamespace, *platform.ClusterNamespace]

// NewREST returns the ClusterNamespace storage over the registry's ClusterNamespace records;
// with heartbeats, its -o wide table shows each object's member data age
// where that is past --member-stale-after.
func NewREST(src store.Source[store.ClusterNamespace], w registry.WatchConfig, heartbeats *registry.MemberHeartbeats) *REST {
	k := registry.WithDataAge(Kind, heartbeats, func(o *platform.ClusterNamespace) string { return o.Status.Cluster })
	return registry.NewREST[store.ClusterNamespace, platform.ClusterNamespace, *platform.ClusterNamespace](k, src, w)
}
