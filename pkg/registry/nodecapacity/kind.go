// Package nodecapacity serves NodeCapacity, the per-node view of capacity,
// requests, usage and schedulability, read-only from the registry.
package nodecapacity

import (
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/example/platform-apiserver/pkg/apis/platform"
	"github.com/example/platform-apiserver/pkg/registry"
	"github.com/example/platform-apiserver/pkg/registry/store"
)

// Kind declares NodeCapacity: names, selectable fields, conversion and
// table (see registry.Kind).
var Kind = &registry.Kind[store.NodeCapacity, platform.NodeCapacity]{
	Kind: "NodeCapacity", Resource: "nodecapacities", Singular: "nodecapacity",
	ShortNames: []string{"nc", "nodecap"}, Categories: []string{"platform"},
	Fields: []registry.Field[platform.NodeCapacity]{
		{Path: "metadata.name", Value: func(o *platform.NodeCapacity) string { return o.Name }, Columns: []string{"cluster_id", "name"}},
		{Path: "status.cluster", Value: func(o *platform.NodeCapacity) string { return o.Status.Cluster }, Columns: []string{"cluster_id"}},
		{Path: "status.nodeName", Value: func(o *platform.NodeCapacity) string { return o.Status.NodeName }, Columns: []string{"name"}},
		{Path: "status.schedulable", Value: func(o *platform.NodeCapacity) string { return strconv.FormatBool(o.Status.Schedulable) },
			Columns: []string{"schedulable"}, Bool: true},
		{Path: "status.unschedulableReason", Value: func(o *platform.NodeCapacity) string { return string(o.Status.UnschedulableReason) },
			Columns: []string{"unschedulable_reason"}, Values: []string{"", store.ReasonNotReady, store.ReasonCordoned, store.ReasonTainted}},
		// Other resources by name (nvidia.com/gpu, ephemeral-storage,
		// hugepages-2Mi), 0 where the node lists none: status.available.other.nvidia.com/gpu!=0.
		{Prefix: "status.allocatable.other.", Key: registry.ResourceName, Amount: store.Amount{Column: "allocatable_other"},
			Get: func(o *platform.NodeCapacity, name string) int64 { return amount(o.Status.Allocatable, name) }},
		{Prefix: "status.requested.other.", Key: registry.ResourceName, Amount: store.Amount{Column: "requested_other"},
			Get: func(o *platform.NodeCapacity, name string) int64 { return amount(o.Status.Requested, name) }},
		{Prefix: "status.available.other.", Key: registry.ResourceName, Amount: store.Amount{Column: "allocatable_other", Minus: "requested_other"},
			Get: func(o *platform.NodeCapacity, name string) int64 { return amount(o.Status.Available, name) }},
		// DRA devices by driver, 0 where no slice of the driver names the
		// node: status.devices.free.gpu.example.com!=0.
		{Prefix: "status.devices.total.", Key: registry.DriverName, Amount: store.Amount{Column: "devices_total"},
			Get: func(o *platform.NodeCapacity, driver string) int64 { return devices(o, driver).Total }},
		{Prefix: "status.devices.free.", Key: registry.DriverName, Amount: store.Amount{Column: "devices_total", Minus: "devices_allocated"},
			Get: func(o *platform.NodeCapacity, driver string) int64 { return devices(o, driver).Free }},
	},
	ToObject: ToObject,
	NewList:  func(items []platform.NodeCapacity) runtime.Object { return &platform.NodeCapacityList{Items: items} },
	Key: func(nc *store.NodeCapacity) registry.ChangeKey {
		return registry.ChangeKey{Name: Name(nc.ClusterID, nc.Node.Name), Cluster: nc.ClusterID}
	},
	Columns: columns,
}

// REST is the NodeCapacity storage.
type REST = registry.REST[store.NodeCapacity, platform.NodeCapacity, *platform.NodeCapacity]

// NewREST returns the NodeCapacity storage over the registry's NodeCapacity records;
// with heartbeats, its -o wide table shows each object's member data age
// where that is past --member-stale-after.
func NewREST(src store.Source[store.NodeCapacity], w registry.WatchConfig, heartbeats *registry.MemberHeartbeats) *REST {
	k := registry.WithDataAge(Kind, heartbeats, func(o *platform.NodeCapacity) string { return o.Status.Cluster })
	return registry.NewREST[store.NodeCapacity, platform.NodeCapacity, *platform.NodeCapacity](k, src, w)
}

// Name is the object name of a member node: <cluster id>.<node name>.
func Name(clusterID, node string) string { return clusterID + "." + node }

// SplitName splits an object name at its first dot; a cluster id is a DNS
// label and so holds none.
func SplitName(name string) (clusterID, node string, ok bool) {
	clusterID, node, ok = strings.Cut(name, ".")
	return clusterID, node, ok && clusterID != "" && node != ""
}

// amount is the whole amount of an other resource, 0 if r lacks it.
// devices is the node's count of the driver's devices, zero for none.
func devices(o *platform.NodeCapacity, driver string) platform.DeviceCount {
	for _, d := range o.Status.Devices {
		if d.Driver == driver {
			return d
		}
	}
	return platform.DeviceCount{}
}

func amount(r platform.NodeResources, name string) int64 {
	q := r.Other[name]
	return q.Value()
}
