package nodecapacity

import (
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/example/platform-apiserver/pkg/apis/platform"
	"github.com/example/platform-apiserver/pkg/registry"
)

// columns are the kubectl table's columns, each with its cell; the
// Priority 1 ones show with -o wide.
var columns = []registry.Column[platform.NodeCapacity]{
	{Name: "Name", Type: "string", Format: "name", Description: "<cluster id>.<node name>",
		Cell: func(o *platform.NodeCapacity) any { return o.Name }},
	{Name: "Schedulable", Type: "boolean", Description: "Ready, not cordoned, and no NoSchedule or NoExecute taint",
		Cell: func(o *platform.NodeCapacity) any { return o.Status.Schedulable }},
	{Name: "Reason", Type: "string", Description: "Why the node is not schedulable, the first that applies: NotReady, Cordoned, Tainted (NoSchedule or NoExecute); <none> when schedulable",
		Cell: func(o *platform.NodeCapacity) any {
			if o.Status.UnschedulableReason == "" {
				return registry.None
			}
			return string(o.Status.UnschedulableReason)
		}},
	{Name: "CPU Req/Alloc", Type: "string", Description: "Sum of CPU requests of non-terminal pods over allocatable CPU",
		Cell: func(o *platform.NodeCapacity) any {
			return cpuRatio(o.Status.Requested.CPU.MilliValue(), o.Status.Allocatable.CPU.MilliValue())
		}},
	{Name: "Mem Req/Alloc", Type: "string", Description: "Sum of memory requests of non-terminal pods over allocatable memory",
		Cell: func(o *platform.NodeCapacity) any {
			return memRatio(o.Status.Requested.Memory.Value(), o.Status.Allocatable.Memory.Value())
		}},
	{Name: "CPU Use/Alloc", Type: "string", Description: "Measured CPU usage (metrics.k8s.io) over allocatable CPU",
		Cell: func(o *platform.NodeCapacity) any {
			if o.Status.Usage == nil {
				return registry.Unknown
			}
			return cpuRatio(o.Status.Usage.CPU.MilliValue(), o.Status.Allocatable.CPU.MilliValue())
		}},
	{Name: "Mem Use/Alloc", Type: "string", Description: "Measured memory working set (metrics.k8s.io) over allocatable memory",
		Cell: func(o *platform.NodeCapacity) any {
			if o.Status.Usage == nil {
				return registry.Unknown
			}
			return memRatio(o.Status.Usage.Memory.Value(), o.Status.Allocatable.Memory.Value())
		}},
	{Name: "Pods", Type: "string", Description: "Non-terminal pods bound to the node over its pod limit",
		Cell: func(o *platform.NodeCapacity) any {
			return strconv.FormatInt(o.Status.Requested.Pods, 10) + "/" + strconv.FormatInt(o.Status.Allocatable.Pods, 10)
		}},
	{Name: "Age", Type: "string", Description: "Time since the member node was created",
		Cell: func(o *platform.NodeCapacity) any { return registry.Age(o.CreationTimestamp, time.Now()) }},
	{Name: "Cluster", Type: "string", Priority: 1, Description: "Member cluster id",
		Cell: func(o *platform.NodeCapacity) any { return o.Status.Cluster }},
	{Name: "Node", Type: "string", Priority: 1, Description: "Node name in the member cluster",
		Cell: func(o *platform.NodeCapacity) any { return o.Status.NodeName }},
	{Name: "Ready", Type: "boolean", Priority: 1, Description: "Node Ready condition is True",
		Cell: func(o *platform.NodeCapacity) any { return o.Status.Ready }},
	{Name: "Cordoned", Type: "boolean", Priority: 1, Description: "spec.unschedulable of the node",
		Cell: func(o *platform.NodeCapacity) any { return o.Status.Unschedulable }},
	{Name: "Extended Free/Alloc", Type: "string", Priority: 1,
		Description: "Per extended resource (a domain-prefixed name such as nvidia.com/gpu) the node allocates: available over allocatable",
		Cell:        func(o *platform.NodeCapacity) any { return extended(&o.Status) }},
	{Name: "Devices Free/Total", Type: "string", Priority: 1,
		Description: "Per DRA driver publishing devices for the node (ResourceSlices): unallocated over published devices",
		Cell:        func(o *platform.NodeCapacity) any { return registry.DeviceCells(o.Status.Devices) }},
}

// extended is the Extended Free/Alloc cell: "nvidia.com/gpu=2/8" per
// extended resource, in name order; <none> without one.
func extended(s *platform.NodeCapacityStatus) string {
	var cells []string
	for _, name := range slices.Sorted(maps.Keys(s.Allocatable.Other)) {
		if !strings.Contains(name, "/") {
			continue // ephemeral-storage, hugepages-<size>
		}
		free, alloc := s.Available.Other[name], s.Allocatable.Other[name]
		cells = append(cells, name+"="+free.String()+"/"+alloc.String())
	}
	if len(cells) == 0 {
		return registry.None
	}
	return strings.Join(cells, ",")
}

func cpuRatio(used, alloc int64) string {
	return registry.Ratio(registry.MilliCPU(used), registry.MilliCPU(alloc), float64(used), float64(alloc))
}

func memRatio(used, alloc int64) string {
	return registry.Ratio(registry.Bytes(used), registry.Bytes(alloc), float64(used), float64(alloc))
}
