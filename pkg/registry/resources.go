package registry

import (
	"maps"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/example/platform-apiserver/pkg/apis/platform"
	"github.com/example/platform-apiserver/pkg/registry/store"
)

// Resources is the API form of an amount of node resources.
func Resources(r store.Resources) platform.NodeResources {
	return platform.NodeResources{
		CPU:    *resource.NewMilliQuantity(r.CPUMillis, resource.DecimalSI),
		Memory: *resource.NewQuantity(r.MemoryBytes, resource.BinarySI),
		Pods:   r.Pods,
		Other:  OtherQuantities(r.Other),
	}
}

// Available is allocatable minus requested, for every resource either has.
func Available(allocatable, requested store.Resources) store.Resources {
	out := store.Resources{
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

// OtherQuantities is the API form of other resources (store.Resources.Other):
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
