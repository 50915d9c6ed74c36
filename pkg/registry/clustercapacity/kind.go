// Package clustercapacity serves ClusterCapacity, each member cluster's
// NodeCapacities and ClusterNamespaces summed by the registry, read-only.
package clustercapacity

import (
	"strconv"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/example/platform-apiserver/pkg/apis/platform"
	"github.com/example/platform-apiserver/pkg/registry"
	"github.com/example/platform-apiserver/pkg/registry/store"
)

// Kind declares ClusterCapacity: names, selectable fields, conversion and
// table (see registry.Kind).
var Kind = &registry.Kind[store.ClusterCapacity, platform.ClusterCapacity]{
	Kind: "ClusterCapacity", Resource: "clustercapacities", Singular: "clustercapacity",
	ShortNames: []string{"cc", "clustercap"}, Categories: []string{"platform"},
	Fields: []registry.Field[platform.ClusterCapacity]{
		{Path: "metadata.name", Value: func(o *platform.ClusterCapacity) string { return o.Name }, Columns: []string{"cluster_id"}},
		{Path: "status.cluster", Value: func(o *platform.ClusterCapacity) string { return o.Status.Cluster }, Columns: []string{"cluster_id"}},
		{Path: "status.hasSchedulableCapacity", Value: func(o *platform.ClusterCapacity) string { return strconv.FormatBool(hasRoom(o)) },
			Columns: []string{"has_room"}, Bool: true},
	},
	ToObject: ToObject,
	NewList: func(items []platform.ClusterCapacity) runtime.Object {
		return &platform.ClusterCapacityList{Items: items}
	},
	Key: func(cc *store.ClusterCapacity) registry.ChangeKey {
		return registry.ChangeKey{Name: cc.ClusterID, Cluster: cc.ClusterID}
	},
	Columns: columns,
}

// REST is the ClusterCapacity storage.
type REST = registry.REST[store.ClusterCapacity, platform.ClusterCapacity, *platform.ClusterCapacity]

// NewREST returns the ClusterCapacity storage over the registry's
// ClusterCapacity records, each member's mirroring judged by f when it is
// read (Judged): gets, lists and a watch's initial objects show a member
// Stale once its heartbeat is past f.StaleAfter; a watch's later events
// are judged when their change is read from the feed.
func NewREST(src store.Source[store.ClusterCapacity], w registry.WatchConfig, f registry.MemberStaleness) *REST {
	k := *Kind
	k.ToObject = Judged(f)
	return registry.NewREST[store.ClusterCapacity, platform.ClusterCapacity, *platform.ClusterCapacity](&k, src, w)
}
