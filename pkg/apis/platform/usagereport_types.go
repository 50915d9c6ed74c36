package platform

import (
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// UsageReport asks the recorded usage history of a member cluster, of one
// of its nodes, or of the nodes its label selector matches, over a window:
// create one and the answer is in the returned status (nothing is stored,
// as with a SubjectAccessReview). `kubectl create -f report.yaml -o yaml`;
// RBAC verb create on usagereports, and get on what it asks about
// (docs/security.md).
type UsageReport struct {
	metav1.TypeMeta
	metav1.ObjectMeta

	// Spec is the question.
	Spec UsageReportSpec
	// Status is the answer, filled by the server.
	Status UsageReportStatus
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// LocalUsageReport asks the usage history of its own namespace in a member
// cluster, as a LocalSubjectAccessReview is the namespaced SubjectAccessReview:
// `kubectl create -n team-a -f report.yaml` answers team-a's. RBAC verb
// create on localusagereports and get on the namespace's ClusterNamespace,
// both of which a RoleBinding of view grants.
type LocalUsageReport struct {
	metav1.TypeMeta
	metav1.ObjectMeta

	// Spec is the question: Cluster and Window; Namespace, if set, must be
	// the report's own; NodeName and NodeSelector are not for this kind.
	Spec UsageReportSpec
	// Status is the answer, filled by the server.
	Status UsageReportStatus
}

// UsageReportSpec selects the samples to summarize.
type UsageReportSpec struct {
	// Cluster is the member cluster's id. Required.
	Cluster string
	// NodeName selects one node of the member (its name in the member).
	NodeName string
	// NodeSelector selects the member's nodes whose labels match it now,
	// as kubectl -l takes it (e.g. "pool=gpu"). Excludes NodeName. Neither:
	// the whole member.
	NodeSelector string
	// Namespace asks the usage of one of the member's namespaces (the sum
	// of its pods' usage at each scrape) instead of nodes'. Excludes
	// NodeName and NodeSelector.
	Namespace string
	// Window is how far back from now, e.g. 1h or 24h (168h for a week), at
	// most the history the server keeps (--metrics-retention). The summary
	// covers the whole UTC hours that overlap it, the current one included.
	Window metav1.Duration
	// Step, if set, also answers the window as a series of buckets of this
	// length: whole hours, aligned to multiples of the step since the Unix
	// epoch, at most MaxUsageBuckets in a window.
	Step *metav1.Duration
	// Recommend, when set, also answers right-sized requests and quota for
	// the namespace from its usage over the window (Status.Recommendation).
	// Only with Namespace; a zero Window is then DefaultRecommendWindow, at
	// most the history the server keeps.
	Recommend *RecommendOptions
}

// RecommendOptions say how a namespace's requests are sized from its usage.
type RecommendOptions struct {
	// Percentile of the usage samples the requests are sized for, 50–100;
	// 0 is DefaultRecommendPercentile.
	Percentile int32
	// HeadroomPercent is added on top of the percentile (and of the
	// maximum, for the quota), 0–100; nil is DefaultRecommendHeadroomPercent.
	HeadroomPercent *int32
}

// The defaults of a recommendation.
const (
	DefaultRecommendWindow          = 7 * 24 * time.Hour
	DefaultRecommendPercentile      = 95
	DefaultRecommendHeadroomPercent = 15
)

// UsageRecommendation is a namespace's right-sized requests and quota
// from its usage over a window, next to what it has now.
type UsageRecommendation struct {
	// Percentile and HeadroomPercent are those the recommendation used.
	Percentile      int32
	HeadroomPercent int32
	// Requests are the CPU and memory the namespace's pods should request
	// in sum: the percentile of its usage plus the headroom, rounded up (CPU
	// to millicores, memory to MiB).
	Requests RecommendedAmounts
	// Quota is the ResourceQuota hard limit to set on requests.cpu and
	// requests.memory: the window's maximum usage plus the headroom, at
	// least Requests.
	Quota RecommendedAmounts
	// Covered is the share of the window's samples at or below Requests,
	// per resource, e.g. "96.4%".
	Covered CoveredShares
	// CurrentRequests are the requests of the namespace's pods now.
	CurrentRequests RecommendedAmounts
	// CurrentQuota is what the namespace's quotas promise on requests.cpu
	// (or cpu) and requests.memory (or memory) now, as ClusterCapacity
	// counts it: the least hard among its quotas without scopes; absent
	// without a quota limiting either.
	CurrentQuota *RecommendedAmounts
	// Frees is CurrentRequests minus Requests: what right-sizing gives
	// back (negative where the pods request too little).
	Frees RecommendedAmounts
}

// RecommendedAmounts are a CPU and a memory amount.
type RecommendedAmounts struct {
	CPU    resource.Quantity
	Memory resource.Quantity
}

// CoveredShares are shares of samples per resource, as percentages.
type CoveredShares struct {
	CPU    string
	Memory string
}

// MaxUsageBuckets bounds the buckets a UsageReport's window holds.
const MaxUsageBuckets = 1000

// UsageReportStatus summarizes the samples: each is one node's usage at
// one scrape, so for several nodes the statistics are of node usage over
// the nodes and the hours.
type UsageReportStatus struct {
	// From and To bound the hours summarized; unset without samples.
	From *metav1.Time
	To   *metav1.Time
	// Nodes counts the nodes with samples in the window.
	Nodes int64
	// Samples counts the samples summarized.
	Samples int64
	// CPU is in cores.
	CPU *UsageStatistics
	// Memory is in bytes.
	Memory *UsageStatistics
	// Accuracy is the relative error bound of the percentiles (they are
	// read from histograms of the samples, hour by hour); averages and
	// maxima are exact before rounding (CPU to millicores, memory to MiB).
	Accuracy string
	// Series is the window bucket by bucket when Spec.Step is set: the
	// buckets with samples, oldest first.
	Series []UsageBucket
	// SamplesCompleteAsOf is the member's usage heartbeat: samples after
	// it are not recorded (yet).
	SamplesCompleteAsOf *metav1.Time
	// Recommendation answers Spec.Recommend; absent without samples.
	Recommendation *UsageRecommendation
}

// UsageBucket summarizes the samples of one step of a window.
type UsageBucket struct {
	Start   metav1.Time
	Samples int64
	CPU     UsagePoint
	Memory  UsagePoint
}

// UsagePoint is a bucket's average, nearest-rank 95th percentile and
// maximum.
type UsagePoint struct {
	Average resource.Quantity
	P95     resource.Quantity
	Max     resource.Quantity
}

// UsageStatistics are the average, nearest-rank percentiles and maximum
// of the samples.
type UsageStatistics struct {
	Average resource.Quantity
	P50     resource.Quantity
	P95     resource.Quantity
	P99     resource.Quantity
	Max     resource.Quantity
}
