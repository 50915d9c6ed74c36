package v1alpha1

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// +genclient
// +genclient:nonNamespaced
// +genclient:onlyVerbs=create
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// UsageReport asks the recorded usage history of a member cluster, of one
// of its nodes, of the nodes its label selector matches, or of one of its
// namespaces, over a window:
// create one and the answer is in the returned status (nothing is stored,
// as with a SubjectAccessReview). `kubectl create -f report.yaml -o yaml`;
// RBAC verb create on usagereports, and get on what it asks about: the
// ClusterNamespace, the NodeCapacity or the ClusterCapacity (list
// nodecapacities for a nodeSelector). Tenants ask with a LocalUsageReport.
type UsageReport struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the question.
	Spec UsageReportSpec `json:"spec"`
	// Status is the answer, filled by the server.
	// +optional
	Status UsageReportStatus `json:"status,omitempty"`
}

// +genclient
// +genclient:onlyVerbs=create
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// LocalUsageReport asks the usage history of its own namespace in a member
// cluster over a window, as a LocalSubjectAccessReview is the namespaced
// SubjectAccessReview: `kubectl create -n team-a -f report.yaml` with spec
// {cluster, window} answers team-a's, in the returned status (nothing is
// stored). RBAC verb create on localusagereports and get on the namespace's
// ClusterNamespace, both of which a RoleBinding of view grants.
type LocalUsageReport struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the question: cluster and window. Namespace, if set, must be
	// the report's own; nodeName and nodeSelector are refused (ask those
	// with a UsageReport).
	Spec UsageReportSpec `json:"spec"`
	// Status is the answer, filled by the server.
	// +optional
	Status UsageReportStatus `json:"status,omitempty"`
}

// UsageReportSpec selects the samples to summarize.
type UsageReportSpec struct {
	// Cluster is the member cluster's id. Required.
	Cluster string `json:"cluster"`
	// NodeName selects one node of the member (its name in the member).
	// +optional
	NodeName string `json:"nodeName,omitempty"`
	// NodeSelector selects the member's nodes whose labels match it now,
	// as kubectl -l takes it (e.g. "pool=gpu"). Excludes NodeName. Neither:
	// the whole member.
	// +optional
	NodeSelector string `json:"nodeSelector,omitempty"`
	// Namespace asks the usage of one of the member's namespaces (the sum
	// of its pods' usage at each scrape) instead of nodes'. Excludes
	// NodeName and NodeSelector.
	// +optional
	Namespace string `json:"namespace,omitempty"`
	// Window is how far back from now, e.g. 1h or 24h (168h for a week), at
	// most the history the server keeps (--metrics-retention). The summary
	// covers the whole UTC hours that overlap it, the current one included.
	Window metav1.Duration `json:"window"`
	// Step, if set, also answers the window as a series of buckets of this
	// length: whole hours (e.g. 1h, 6h or 24h), aligned to multiples of the
	// step since the Unix epoch (24h: UTC days), at most 1000 in a window.
	// +optional
	Step *metav1.Duration `json:"step,omitempty"`
	// Recommend, when set, also answers right-sized requests and quota for
	// spec.namespace (a LocalUsageReport's own) from its usage over the
	// window, in status.recommendation. A window left unset is then 168h
	// (a week), or the whole history the server keeps if that is shorter.
	// +optional
	Recommend *RecommendOptions `json:"recommend,omitempty"`
}

// RecommendOptions say how a namespace's requests are sized from its usage.
type RecommendOptions struct {
	// Percentile of the usage samples the requests are sized for, 50–100.
	// Default 95.
	// +optional
	Percentile int32 `json:"percentile,omitempty"`
	// HeadroomPercent is added on top of the percentile (and of the
	// maximum, for the quota), 0–100. Default 15.
	// +optional
	HeadroomPercent *int32 `json:"headroomPercent,omitempty"`
}

// UsageRecommendation is a namespace's right-sized requests and quota
// from its usage over the window, next to what it has now. It is for the
// namespace as a whole: usage is recorded per namespace (the sum of its
// pods' metrics at each scrape), not per workload.
type UsageRecommendation struct {
	// Percentile and HeadroomPercent are those the recommendation used.
	Percentile      int32 `json:"percentile"`
	HeadroomPercent int32 `json:"headroomPercent"`
	// Requests are the CPU and memory the namespace's pods should request
	// in sum: the percentile of its usage plus the headroom, rounded up
	// (CPU to millicores, memory to MiB).
	Requests RecommendedAmounts `json:"requests"`
	// Quota is the ResourceQuota hard limit to set on requests.cpu and
	// requests.memory: the window's maximum usage plus the headroom, at
	// least requests.
	Quota RecommendedAmounts `json:"quota"`
	// Covered is the share of the window's samples at or below requests,
	// per resource, e.g. "96.4%" (read from the histograms: within the
	// accuracy of the percentiles).
	Covered CoveredShares `json:"covered"`
	// CurrentRequests are the requests of the namespace's pods now.
	CurrentRequests RecommendedAmounts `json:"currentRequests"`
	// CurrentQuota is what the namespace's quotas promise on requests.cpu
	// (or cpu) and requests.memory (or memory) now, as ClusterCapacity
	// counts it: the least hard among its quotas without scopes; absent
	// without a quota limiting either (a resource no quota limits is 0).
	// +optional
	CurrentQuota *RecommendedAmounts `json:"currentQuota,omitempty"`
	// Frees is currentRequests minus requests: what right-sizing gives
	// back (negative where the pods request too little).
	Frees RecommendedAmounts `json:"frees"`
}

// RecommendedAmounts are a CPU and a memory amount.
type RecommendedAmounts struct {
	// CPU in cores, e.g. 1250m.
	CPU resource.Quantity `json:"cpu"`
	// Memory in bytes, e.g. 3200Mi.
	Memory resource.Quantity `json:"memory"`
}

// CoveredShares are shares of samples per resource, as percentages.
type CoveredShares struct {
	CPU    string `json:"cpu"`
	Memory string `json:"memory"`
}

// UsageReportStatus summarizes the samples: each is one node's usage at
// one scrape, so for several nodes the statistics are of node usage over
// the nodes and the hours.
type UsageReportStatus struct {
	// From and To bound the hours summarized; unset without samples.
	// +optional
	From *metav1.Time `json:"from,omitempty"`
	// +optional
	To *metav1.Time `json:"to,omitempty"`
	// Nodes counts the nodes with samples in the window (0 for a namespace).
	Nodes int64 `json:"nodes"`
	// Samples counts the samples summarized.
	Samples int64 `json:"samples"`
	// CPU is in cores, e.g. 915m.
	// +optional
	CPU *UsageStatistics `json:"cpu,omitempty"`
	// Memory is in bytes, e.g. 1628Mi.
	// +optional
	Memory *UsageStatistics `json:"memory,omitempty"`
	// Accuracy is the relative error bound of the percentiles (they are
	// read from histograms of the samples, hour by hour); averages and
	// maxima are exact before rounding: all quantities are rounded as
	// kubectl top prints them, CPU to whole millicores, memory to whole
	// MiB.
	Accuracy string `json:"accuracy,omitempty"`
	// Series is the window bucket by bucket when spec.step is set: the
	// buckets with samples, oldest first (a bucket without samples is
	// left out).
	// +optional
	// +listType=atomic
	Series []UsageBucket `json:"series,omitempty"`
	// SamplesCompleteAsOf is up to when the member's samples are
	// complete: when the newest node metrics sample recorded of it was
	// taken (its usage heartbeat, ClusterCapacity
	// status.mirroring.lastUsageTime). Samples after it are not in the
	// registry yet, or were never taken (the member's metrics-server does
	// not answer). Unset before a sample.
	// +optional
	SamplesCompleteAsOf *metav1.Time `json:"samplesCompleteAsOf,omitempty"`
	// Recommendation answers spec.recommend; absent without samples.
	// +optional
	Recommendation *UsageRecommendation `json:"recommendation,omitempty"`
}

// UsageBucket summarizes the samples of one step of a UsageReport's
// window.
type UsageBucket struct {
	// Start is the bucket's first instant; it ends a step later.
	Start metav1.Time `json:"start"`
	// Samples counts the samples summarized.
	Samples int64 `json:"samples"`
	// CPU is in cores.
	CPU UsagePoint `json:"cpu"`
	// Memory is in bytes.
	Memory UsagePoint `json:"memory"`
}

// UsagePoint is a bucket's average, nearest-rank 95th percentile and
// maximum of the samples.
type UsagePoint struct {
	Average resource.Quantity `json:"average"`
	P95     resource.Quantity `json:"p95"`
	Max     resource.Quantity `json:"max"`
}

// UsageStatistics are the average, nearest-rank percentiles and maximum
// of the samples.
type UsageStatistics struct {
	Average resource.Quantity `json:"average"`
	P50     resource.Quantity `json:"p50"`
	P95     resource.Quantity `json:"p95"`
	P99     resource.Quantity `json:"p99"`
	Max     resource.Quantity `json:"max"`
}
