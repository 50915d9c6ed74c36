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
	{Name: "Quota", Type: "string", Description: "The most used resource across the namespace's ResourceQuotas: used/hard (percent)",
		Cell: func(o *platform.ClusterNamespace) any { return quotaSummary(o.Status.Quotas) }},
	{Name: "Age", Type: "string", Description: "Time since the member namespace was created",
		Cell: func(o *platform.ClusterNamespace) any { return registry.Age(o.CreationTimestamp, time.Now()) }},
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
