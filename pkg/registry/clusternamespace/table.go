package clusternamespace

import (
	"sort"
	"strconv"
	"time"

	"github.com/example/platform-apiserver/pkg/apis/platform"
	"github.com/example/platform-apiserver/pkg/registry"
)

// columns are the kubectl table's columns, each with its cell.
var columns = []registry.Column[platform.ClusterNamespace]{
	{Name: "Name", Type: "string", Format: "name", Description: "Member cluster id",
		Cell: func(o *platform.ClusterNamespace) any { return o.Name }},
	{Name: "Phase", Type: "string", Description: "Active or Terminating",
		Cell: func(o *platform.ClusterNamespace) any { return string(o.Status.Phase) }},
	{Name: "Pods", Type: "integer", Description: "Non-terminal pods in the namespace",
		Cell: func(o *platform.ClusterNamespace) any { return o.Status.PodCount }},
	{Name: "CPU Req", Type: "string", Description: "Sum of CPU requests of non-terminal pods",
		Cell: func(o *platform.ClusterNamespace) any { return registry.MilliCPU(o.Status.Requests.CPU.MilliValue()) }},
	{Name: "Memory Req", Type: "string", Description: "Sum of memory requests of non-terminal pods",
		Cell: func(o *platform.ClusterNamespace) any { return registry.Bytes(o.Status.Requests.Memory.Value()) }},
	{Name: "CPU Use", Type: "string", Description: "Measured CPU usage of the namespace's pods, in percent of its CPU requests",
		Cell: func(o *platform.ClusterNamespace) any { return usageCell(o.Status.Usage, true) }},
	{Name: "Memory Use", Type: "string", Description: "Measured memory usage of the namespace's pods, in percent of its memory requests", Priority: 1,
		Cell: func(o *platform.ClusterNamespace) any { return usageCell(o.Status.Usage, false) }},
	{Name: "Quota", Type: "string", Description: "The most used resource across the namespace's ResourceQuotas: used/hard (percent)",
		Cell: func(o *platform.ClusterNamespace) any { return quotaSummary(o.Status.Quotas) }},
	{Name: "Age", Type: "string", Description: "Time since the member namespace was created",
		Cell: func(o *platform.ClusterNamespace) any { return registry.Age(o.CreationTimestamp, time.Now()) }},
}

// usageCell shows measured usage and its share of the requests, e.g.
// "420m (42%)"; "<unknown>" before the namespace's pods were measured.
func usageCell(u *platform.NamespaceUsage, cpu bool) string {
	if u == nil {
		return "<unknown>"
	}
	value, of := registry.MilliCPU(u.CPU.MilliValue()), u.CPUOfRequests
	if !cpu {
		value, of = registry.Bytes(u.Memory.Value()), u.MemoryOfRequests
	}
	if of == nil {
		return value
	}
	return value + " (" + strconv.FormatInt(*of, 10) + "%)"
}

// quotaSummary names the quota resource closest to its limit, e.g.
// "requests.cpu 1500m/2 (75%)", and how many quotas there are beyond one.
func quotaSummary(quotas []platform.ResourceQuotaStatus) string {
	if len(quotas) == 0 {
		return "<none>"
	}
	best, bestRatio := "", -1.0
	for _, q := range quotas {
		names := make([]string, 0, len(q.Hard))
		for name := range q.Hard {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			hard, used := q.Hard[name], q.Used[name]
			h, u := hard.AsApproximateFloat64(), used.AsApproximateFloat64()
			ratio := 0.0
			if h > 0 {
				ratio = u / h
			}
			if ratio > bestRatio {
				bestRatio = ratio
				best = name + " " + registry.Ratio(used.String(), hard.String(), u, h)
			}
		}
	}
	if best == "" {
		best = "<no limits>"
	}
	if len(quotas) > 1 {
		best += " (+" + strconv.Itoa(len(quotas)-1) + " quotas)"
	}
	return best
}
