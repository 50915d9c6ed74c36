package clusternamespace

import (
	"sort"
	"strconv"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/example/platform-apiserver/pkg/apis/platform"
	"github.com/example/platform-apiserver/pkg/registry"
)

// columns are the kubectl table's columns; cells fills them.
var columns = []metav1.TableColumnDefinition{
	{Name: "Name", Type: "string", Format: "name", Description: "Member cluster id"},
	{Name: "Phase", Type: "string", Description: "Active or Terminating"},
	{Name: "Pods", Type: "integer", Description: "Non-terminal pods in the namespace"},
	{Name: "CPU Req", Type: "string", Description: "Sum of CPU requests of non-terminal pods"},
	{Name: "Memory Req", Type: "string", Description: "Sum of memory requests of non-terminal pods"},
	{Name: "Quota", Type: "string", Description: "The most used resource across the namespace's ResourceQuotas: used/hard (percent)"},
	{Name: "Age", Type: "string", Description: "Time since the member namespace was created"},
}

func cells(cn *platform.ClusterNamespace) []any {
	s := &cn.Status
	return []any{
		cn.Name,
		string(s.Phase),
		s.PodCount,
		registry.MilliCPU(s.Requests.CPU.MilliValue()),
		registry.Bytes(s.Requests.Memory.Value()),
		quotaSummary(s.Quotas),
		registry.Age(cn.CreationTimestamp, time.Now()),
	}
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
