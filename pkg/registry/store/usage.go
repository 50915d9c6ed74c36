package store

import (
	"time"

	"k8s.io/apimachinery/pkg/labels"
)

// UsageQuery selects recorded usage samples of one member: of one of its
// nodes (Node), of its nodes whose labels match Labels now, of one of its
// namespaces (Namespace), or of the whole member (none), observed in the
// whole UTC hours that overlap the window from Since until now.
type UsageQuery struct {
	ClusterID string
	Node      string
	Labels    labels.Requirements
	// Namespace selects one namespace's usage (its pods' summed) instead
	// of nodes'.
	Namespace string
	Since     time.Time
	// Step, if positive (whole hours), also asks the history bucket by
	// bucket: buckets of Step aligned to multiples of it since the Unix
	// epoch.
	Step time.Duration
	// Recommend, when set, also sizes requests from the samples
	// (UsageHistory.Recommendation).
	Recommend *RecommendQuery
}

// RecommendQuery says how requests are sized from usage samples: the
// Percentile (0–1) of the samples plus Headroom (a fraction: 0.15 adds
// 15 %).
type RecommendQuery struct {
	Percentile, Headroom float64
}

// UsageRecommendation is requests sized from the samples: CPU in
// nanocores rounded up to whole millicores, memory in bytes rounded up
// to whole MiB.
type UsageRecommendation struct {
	// Requests is the percentile plus the headroom, Quota the maximum plus
	// the headroom (at least Requests).
	Requests, Quota UsageAmounts
	// CPUCovered and MemoryCovered are the shares (0–1) of the samples at
	// or below Requests, read from the histograms.
	CPUCovered, MemoryCovered float64
}

// UsageAmounts are a CPU (nanocores) and a memory (bytes) amount.
type UsageAmounts struct {
	CPU, Memory int64
}

// UsageHistory summarizes the samples a UsageQuery selects. Each sample is
// one node's usage at one scrape, so for several nodes the percentiles are
// of the distribution of node usage over the nodes and the hours.
type UsageHistory struct {
	// From and To bound the hours summarized (zero without samples).
	From, To time.Time
	// Nodes counts the nodes with samples, Samples the samples.
	Nodes   int64
	Samples int64
	// CPU in nanocores, Memory in bytes.
	CPU, Memory UsageStats
	// Series holds the buckets with samples, oldest first, when the query
	// has a Step.
	Series []UsageBucket
	// SamplesAsOf is the member's usage heartbeat: when the newest node
	// metrics sample recorded of it was taken; zero before one.
	SamplesAsOf time.Time
	// Recommendation answers the query's Recommend; nil without samples.
	Recommendation *UsageRecommendation
}

// UsageBucket summarizes the samples of one step.
type UsageBucket struct {
	Start       time.Time
	Samples     int64
	CPU, Memory UsageStats
}

// UsageStats are the average, percentiles (nearest rank, within
// UsageAccuracy of the exact value) and maximum (exact) of samples.
type UsageStats struct {
	Average, P50, P95, P99, Max int64
}

// UsageAccuracy bounds the relative error of UsageStats' percentiles: they
// are read from histograms whose buckets span 2 %.
const UsageAccuracy = 0.01

// NamespaceMetricsSample is one namespace's usage at one scrape: the sum
// of its pods' metrics.k8s.io PodMetrics (every container), and how many
// pods had metrics.
type NamespaceMetricsSample struct {
	ClusterID    string
	Namespace    string
	CPUNanoCores int64
	MemoryBytes  int64
	Pods         int64
	ObservedAt   time.Time
}

// NamespaceUsage is a namespace's reported sample (see UsageReporting: a
// namespace's is reported when it moves by more than the threshold of the
// larger of its requests and its reported usage, or a period passed).
type NamespaceUsage struct {
	CPUNanoCores int64
	MemoryBytes  int64
	Pods         int64
	Timestamp    time.Time
}
