package nodecapacity

import (
	"strconv"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/example/platform-apiserver/pkg/apis/platform"
	"github.com/example/platform-apiserver/pkg/registry"
)

// columns are the kubectl table's columns; cells fills them.
var columns = []metav1.TableColumnDefinition{
	{Name: "Name", Type: "string", Format: "name", Description: "<cluster id>.<node name>"},
	{Name: "Schedulable", Type: "boolean", Description: "Ready, not cordoned, and no NoSchedule or NoExecute taint"},
	{Name: "CPU Req/Alloc", Type: "string", Description: "Sum of CPU requests of non-terminal pods over allocatable CPU"},
	{Name: "Mem Req/Alloc", Type: "string", Description: "Sum of memory requests of non-terminal pods over allocatable memory"},
	{Name: "CPU Use/Alloc", Type: "string", Description: "Measured CPU usage (metrics.k8s.io) over allocatable CPU"},
	{Name: "Mem Use/Alloc", Type: "string", Description: "Measured memory working set (metrics.k8s.io) over allocatable memory"},
	{Name: "Pods", Type: "string", Description: "Non-terminal pods bound to the node over its pod limit"},
	{Name: "Age", Type: "string", Description: "Time since the member node was created"},
	{Name: "Cluster", Type: "string", Priority: 1, Description: "Member cluster id"},
	{Name: "Node", Type: "string", Priority: 1, Description: "Node name in the member cluster"},
	{Name: "Ready", Type: "boolean", Priority: 1, Description: "Node Ready condition is True"},
	{Name: "Cordoned", Type: "boolean", Priority: 1, Description: "spec.unschedulable of the node"},
}

func cells(nc *platform.NodeCapacity) []any {
	s := &nc.Status
	allocCPU, allocMem := s.Allocatable.CPU.MilliValue(), s.Allocatable.Memory.Value()
	cpuUse, memUse := registry.Unknown, registry.Unknown
	if s.Usage != nil {
		cpuUse = cpuRatio(s.Usage.CPU.MilliValue(), allocCPU)
		memUse = memRatio(s.Usage.Memory.Value(), allocMem)
	}
	return []any{
		nc.Name,
		s.Schedulable,
		cpuRatio(s.Requested.CPU.MilliValue(), allocCPU),
		memRatio(s.Requested.Memory.Value(), allocMem),
		cpuUse,
		memUse,
		strconv.FormatInt(s.Requested.Pods, 10) + "/" + strconv.FormatInt(s.Allocatable.Pods, 10),
		registry.Age(nc.CreationTimestamp, time.Now()),
		s.Cluster,
		s.NodeName,
		s.Ready,
		s.Unschedulable,
	}
}

func cpuRatio(used, alloc int64) string {
	return registry.Ratio(registry.MilliCPU(used), registry.MilliCPU(alloc), float64(used), float64(alloc))
}

func memRatio(used, alloc int64) string {
	return registry.Ratio(registry.Bytes(used), registry.Bytes(alloc), float64(used), float64(alloc))
}
