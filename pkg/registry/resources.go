package registry

import (
	"maps"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/example/platform-apiserver/pkg/apis/platform"
	"github.com/example/platform-apiserver/pkg/registry/store"
)

// Resources is the API form of an amount of node resources.
func Resources(r store.Quantities) platform.NodeResources {
	return platform.NodeResources{
		CPU:    *resource.NewMilliQuantity(r.CPUMillis, resource.DecimalSI),
		Memory: *resource.NewQuantity(r.MemoryBytes, resource.BinarySI),
		Pods:   r.Pods,
		Other:  OtherQuantities(r.Other),
	}
}

// Available is allocatable minus requested, for every resource either has.
func Available(allocatable, requested store.Quantities) store.Quantities {
	out := store.Quantities{
		CPUMillis:   allocatable.CPUMillis - requested.CPUMillis,
		MemoryBytes: allocatable.MemoryBytes - requested.MemoryBytes,
		Pods:        allocatable.Pods - requested.Pods,
	}
	if len(allocatable.Other)+len(requested.Other) > 0 {
		out.Other = maps.Clone(allocatable.Other)
		if out.Other == nil {
			out.Other = make(map[string]int64, len(requested.Other))
		}
		for name, v := range requested.Other {
			out.Other[name] -= v
		}
	}
	return out
}

// OtherQuantities is the API form of other resources (store.Quantities.Other):
// bytes in binary units (ephemeral-storage, hugepages-<size>), counts in
// decimal ones; nil for none.
func OtherQuantities(other map[string]int64) map[string]resource.Quantity {
	if len(other) == 0 {
		return nil
	}
	out := make(map[string]resource.Quantity, len(other))
	for name, v := range other {
		format := resource.DecimalSI
		if name == "ephemeral-storage" || strings.HasPrefix(name, "hugepages-") {
			format = resource.BinarySI
		}
		out[name] = *resource.NewQuantity(v, format)
	}
	return out
}

// Devices is the API form of DRA device counts per driver, sorted by
// driver; nil for none.
func Devices(counts map[string]store.DeviceCount) []platform.DeviceCount {
	if len(counts) == 0 {
		return nil
	}
	out := make([]platform.DeviceCount, 0, len(counts))
	for _, driver := range slices.Sorted(maps.Keys(counts)) {
		c := counts[driver]
		out = append(out, platform.DeviceCount{Driver: driver, Total: c.Total, Allocated: c.Allocated, Free: c.Total - c.Allocated})
	}
	return out
}

// MemberDevices is the API form of a member's DRA devices; nil before
// discovery looked at its DRA API.
func MemberDevices(d *store.MemberDevices) *platform.MemberDevices {
	if d == nil {
		return nil
	}
	out := &platform.MemberDevices{API: platform.DeviceAPIState(d.API)}
	for _, c := range Devices(d.Drivers) {
		out.Drivers = append(out.Drivers, platform.MemberDeviceCount{
			Driver: c.Driver, Total: c.Total, Allocated: c.Allocated, Free: c.Free, Nodes: d.Nodes[c.Driver]})
	}
	return out
}

// DeviceClaims is the API form of a namespace's claims per device class,
// sorted by class; nil for none.
func DeviceClaims(counts map[string]store.ClaimCount) []platform.DeviceClaimCount {
	if len(counts) == 0 {
		return nil
	}
	out := make([]platform.DeviceClaimCount, 0, len(counts))
	for _, class := range slices.Sorted(maps.Keys(counts)) {
		c := counts[class]
		out = append(out, platform.DeviceClaimCount{DeviceClassName: class, Claims: c.Claims, AllocatedDevices: c.Devices})
	}
	return out
}

// DeviceCells is a table cell of device counts: "gpu.example.com=2/8"
// (free over total) per driver; <none> without devices.
func DeviceCells(counts []platform.DeviceCount) string {
	if len(counts) == 0 {
		return None
	}
	cells := make([]string, len(counts))
	for i, c := range counts {
		cells[i] = c.Driver + "=" + strconv.FormatInt(c.Free, 10) + "/" + strconv.FormatInt(c.Total, 10)
	}
	return strings.Join(cells, ",")
}
