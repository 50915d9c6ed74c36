package clustercapacity

import (
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/example/platform-apiserver/pkg/apis/platform"
	"github.com/example/platform-apiserver/pkg/registry"
)

// columns are the kubectl table's columns, each with its cell; the
// Priority 1 ones show with -o wide. The default ones read headroom over
// the schedulable nodes, with denominators.
var columns = []registry.Column[platform.ClusterCapacity]{
	{Name: "Name", Type: "string", Format: "name", Description: "Member cluster id",
		Cell: func(o *platform.ClusterCapacity) any { return o.Name }},
	{Name: "Schedulable", Type: "string", Description: "Schedulable nodes over all nodes",
		Cell: func(o *platform.ClusterCapacity) any { return ratio(o.Status.Nodes.Schedulable, o.Status.Nodes.Total) }},
	{Name: "CPU Free/Alloc", Type: "string", Description: "Unrequested CPU over allocatable CPU of the schedulable nodes, in cores",
		Cell: func(o *platform.ClusterCapacity) any {
			s := o.Status.Schedulable
			return registry.Ratio(cores(s.Available.CPU.MilliValue()), cores(s.Allocatable.CPU.MilliValue()),
				float64(s.Available.CPU.MilliValue()), float64(s.Allocatable.CPU.MilliValue()))
		}},
	{Name: "Mem Free/Alloc", Type: "string", Description: "Unrequested memory over allocatable memory of the schedulable nodes",
		Cell: func(o *platform.ClusterCapacity) any {
			s := o.Status.Schedulable
			return registry.Ratio(registry.Bytes(s.Available.Memory.Value()), registry.Bytes(s.Allocatable.Memory.Value()),
				float64(s.Available.Memory.Value()), float64(s.Allocatable.Memory.Value()))
		}},
	{Name: "Largest Free", Type: "string", Description: "The most CPU and the most memory one schedulable node has left",
		Cell: func(o *platform.ClusterCapacity) any {
			f := o.Status.LargestFree
			if f == nil {
				return registry.None
			}
			return registry.MilliCPU(f.CPU.MilliValue()) + ", " + registry.Bytes(f.Memory.Value())
		}},
	{Name: "Pods", Type: "string", Description: "Pods bound to schedulable nodes over their pod limit",
		Cell: func(o *platform.ClusterCapacity) any {
			s := o.Status.Schedulable
			return ratio(s.Requested.Pods, s.Allocatable.Pods)
		}},
	{Name: "Mirroring", Type: "string", Description: "The member's mirroring state (Syncing, Synced, Lagging, Unreachable, or Stale: its heartbeat is past --member-stale-after) and for how long",
		Cell: func(o *platform.ClusterCapacity) any {
			m := o.Status.Mirroring
			if m.State == "" || m.Since == nil {
				return registry.Unknown
			}
			return string(m.State) + " (" + registry.Age(*m.Since, time.Now()) + ")"
		}},
	{Name: "Age", Type: "string", Description: "Time since the registry first saw the member",
		Cell: func(o *platform.ClusterCapacity) any { return registry.Age(o.CreationTimestamp, time.Now()) }},
	{Name: "Ready", Type: "string", Priority: 1, Description: "Ready nodes over all nodes",
		Cell: func(o *platform.ClusterCapacity) any { return ratio(o.Status.Nodes.Ready, o.Status.Nodes.Total) }},
	{Name: "Cordoned", Type: "integer", Priority: 1, Description: "Cordoned nodes",
		Cell: func(o *platform.ClusterCapacity) any { return o.Status.Nodes.Cordoned }},
	{Name: "Tainted", Type: "integer", Priority: 1, Description: "Nodes with a NoSchedule or NoExecute taint",
		Cell: func(o *platform.ClusterCapacity) any { return o.Status.Nodes.Tainted }},
	{Name: "CPU Use/Alloc", Type: "string", Priority: 1, Description: "Measured CPU usage over allocatable CPU of the schedulable nodes (of those reporting usage)",
		Cell: func(o *platform.ClusterCapacity) any {
			s := o.Status.Schedulable
			if s.Usage == nil {
				return registry.Unknown
			}
			return registry.Ratio(cores(s.Usage.CPU.MilliValue()), cores(s.Allocatable.CPU.MilliValue()),
				float64(s.Usage.CPU.MilliValue()), float64(s.Allocatable.CPU.MilliValue()))
		}},
	{Name: "Mem Use/Alloc", Type: "string", Priority: 1, Description: "Measured memory working set over allocatable memory of the schedulable nodes",
		Cell: func(o *platform.ClusterCapacity) any {
			s := o.Status.Schedulable
			if s.Usage == nil {
				return registry.Unknown
			}
			return registry.Ratio(registry.Bytes(s.Usage.Memory.Value()), registry.Bytes(s.Allocatable.Memory.Value()),
				float64(s.Usage.Memory.Value()), float64(s.Allocatable.Memory.Value()))
		}},
	{Name: "All CPU Req/Alloc", Type: "string", Priority: 1, Description: "CPU requests over allocatable CPU of every node, in cores",
		Cell: func(o *platform.ClusterCapacity) any {
			a := o.Status.All
			return registry.Ratio(cores(a.Requested.CPU.MilliValue()), cores(a.Allocatable.CPU.MilliValue()),
				float64(a.Requested.CPU.MilliValue()), float64(a.Allocatable.CPU.MilliValue()))
		}},
	{Name: "CPU Committed", Type: "string", Priority: 1,
		Description: "requests.cpu the namespaces' ResourceQuotas promise (status.committed.hard) over allocatable CPU of the schedulable nodes, in cores, and in percent: over 100% is overcommitted",
		Cell: func(o *platform.ClusterCapacity) any {
			return committedCell(o, "requests.cpu", func(q resource.Quantity) string { return cores(q.MilliValue()) },
				cores(o.Status.Schedulable.Allocatable.CPU.MilliValue()))
		}},
	{Name: "Mem Committed", Type: "string", Priority: 1,
		Description: "requests.memory the namespaces' ResourceQuotas promise (status.committed.hard) over allocatable memory of the schedulable nodes, and in percent: over 100% is overcommitted",
		Cell: func(o *platform.ClusterCapacity) any {
			return committedCell(o, "requests.memory", func(q resource.Quantity) string { return registry.Bytes(q.Value()) },
				registry.Bytes(o.Status.Schedulable.Allocatable.Memory.Value()))
		}},
	{Name: "Namespaces", Type: "integer", Priority: 1, Description: "Namespaces of the member",
		Cell: func(o *platform.ClusterCapacity) any { return o.Status.Namespaces }},
	{Name: "All Pods", Type: "integer", Priority: 1, Description: "Non-terminal pods of the member, scheduled or not",
		Cell: func(o *platform.ClusterCapacity) any { return o.Status.Pods }},
	{Name: "Devices Free/Total", Type: "string", Priority: 1,
		Description: "Per DRA driver: unallocated over published devices of the member; Absent or Forbidden when discovery cannot list its resource.k8s.io API",
		Cell: func(o *platform.ClusterCapacity) any {
			d := o.Status.Devices
			switch {
			case d == nil:
				return registry.Unknown
			case d.API != platform.DeviceAPIServed:
				return string(d.API)
			}
			counts := make([]platform.DeviceCount, len(d.Drivers))
			for i, c := range d.Drivers {
				counts[i] = platform.DeviceCount{Driver: c.Driver, Total: c.Total, Allocated: c.Allocated, Free: c.Free}
			}
			return registry.DeviceCells(counts)
		}},
	{Name: "Last Change", Type: "string", Priority: 1, Description: "How long ago the registry last mirrored a change of the member (to a minute)",
		Cell: func(o *platform.ClusterCapacity) any {
			if t := o.Status.Mirroring.LastChangeTime; t != nil {
				return registry.Age(*t, time.Now())
			}
			return registry.Unknown
		}},
	{Name: "Data Age", Type: "string", Priority: 1, Description: "How old the member's mirror is: the time since the registry last held every change of the member (its heartbeat, to a minute)",
		Cell: func(o *platform.ClusterCapacity) any {
			if t := o.Status.Mirroring.CompleteAsOf; t != nil {
				return registry.Age(*t, time.Now())
			}
			return registry.Unknown
		}},
	{Name: "Usage Age", Type: "string", Priority: 1, Description: "How old the newest node usage sample of the member is (its usage heartbeat, to a minute): nodes' usage holds as of then",
		Cell: func(o *platform.ClusterCapacity) any {
			if t := o.Status.Mirroring.LastUsageTime; t != nil {
				return registry.Age(*t, time.Now())
			}
			return registry.Unknown
		}},
}

func ratio(part, whole int64) string {
	return strconv.FormatInt(part, 10) + "/" + strconv.FormatInt(whole, 10)
}

// cores prints millicores as cores, with a decimal when not whole ("12",
// "3.5"): cluster totals read better in cores than in millicores.
func cores(m int64) string {
	if m%1000 == 0 {
		return strconv.FormatInt(m/1000, 10)
	}
	return strconv.FormatFloat(float64(m)/1000, 'f', 1, 64)
}

// committedCell prints a committed hard over the schedulable allocatable it
// limits (whole, printed), with status.committed.percentOfAllocatable:
// "12/8 (150%)"; <none> while no quota without scopes limits the resource.
func committedCell(o *platform.ClusterCapacity, name string, format func(resource.Quantity) string, whole string) string {
	c := o.Status.Committed
	if c == nil {
		return registry.None
	}
	hard, ok := c.Hard[name]
	if !ok {
		return registry.None
	}
	if p, ok := c.PercentOfAllocatable[name]; ok {
		return format(hard) + "/" + whole + " (" + strconv.FormatInt(p, 10) + "%)"
	}
	return format(hard) + "/" + whole
}
