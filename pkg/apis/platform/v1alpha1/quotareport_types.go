package v1alpha1

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// +genclient
// +genclient:nonNamespaced
// +genclient:onlyVerbs=create
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// QuotaReport asks whether a proposed ResourceQuota for a namespace can be
// backed by each member cluster: what the member's quotas promise before
// and after it, against its schedulable allocatable and the platform's
// overcommit policy, next to the namespace's usage there. Create one and
// the answer is in the returned status (nothing is stored). RBAC verb
// create on quotareports, get on the ClusterCapacity of every member
// named (list clustercapacities for every member), and get on the
// namespace's ClusterNamespace in each. Tenants ask with a
// LocalQuotaReport. docs/clustercapacity.md.
type QuotaReport struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`
	// Spec is the question: the namespace, the proposed quota, the members.
	Spec QuotaReportSpec `json:"spec"`
	// Status is the answer, filled by the server.
	// +optional
	Status QuotaReportStatus `json:"status,omitempty"`
}

// +genclient
// +genclient:onlyVerbs=create
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// LocalQuotaReport is QuotaReport for the namespace it is created in, as
// LocalUsageReport is to UsageReport: `kubectl create -n team-a -f
// quota.yaml`. Its spec.namespace, if set, must be its own.
type LocalQuotaReport struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`
	// Spec is the question.
	Spec QuotaReportSpec `json:"spec"`
	// Status is the answer, filled by the server.
	// +optional
	Status QuotaReportStatus `json:"status,omitempty"`
}

// QuotaReportSpec is a proposed quota for a namespace and the members to
// answer for. Its map and list are atomic (created once, never patched).
type QuotaReportSpec struct {
	// Namespace is the namespace the quota is for. Required in a
	// QuotaReport; a LocalQuotaReport's is its own.
	// +optional
	Namespace string `json:"namespace,omitempty"`
	// Hard is the proposed quota's spec.hard on what pods use: pods,
	// requests.<resource> and limits.<resource> (cpu, memory and
	// ephemeral-storage as requests.cpu, requests.memory and
	// requests.ephemeral-storage, as quota admission counts them). It
	// replaces what the namespace's quotas promise now.
	// +mapType=atomic
	Hard map[string]resource.Quantity `json:"hard"`
	// Clusters names the members to answer for; empty: every member.
	// +optional
	// +listType=atomic
	Clusters []string `json:"clusters,omitempty"`
	// Window is how far back the namespace's usage is read (its p95 in
	// each member): 168h by default, at most the history the server keeps.
	// +optional
	Window *metav1.Duration `json:"window,omitempty"`
}

// QuotaReportStatus answers per member, best first: those where the quota
// fits the policy before those where it does not, then most room left (the
// lowest share of allocatable its tightest resource would be committed
// at), stale members last.
type QuotaReportStatus struct {
	// +optional
	// +listType=atomic
	Clusters []QuotaClusterAnswer `json:"clusters,omitempty"`
}

// QuotaVerdict is whether a member can back a quota.
type QuotaVerdict string

const (
	// QuotaFits: every resource stays within the policy's overcommit.
	QuotaFits QuotaVerdict = "Fits"
	// QuotaExceedsPolicy: some resource would be committed past it.
	QuotaExceedsPolicy QuotaVerdict = "ExceedsPolicy"
)

// QuotaClusterAnswer is one member's answer.
type QuotaClusterAnswer struct {
	// Cluster is the member's id.
	Cluster string `json:"cluster"`
	// Verdict is Fits or ExceedsPolicy; Reason names the resources past
	// the policy.
	Verdict QuotaVerdict `json:"verdict"`
	// +optional
	Reason string `json:"reason,omitempty"`
	// Resources answers each resource of spec.hard, in its order by name.
	// +listType=atomic
	Resources []QuotaResourceAnswer `json:"resources"`
	// UsageP95 is the namespace's 95th percentile usage in the member over
	// the window; absent without samples.
	// +optional
	UsageP95 *RecommendedAmounts `json:"usageP95,omitempty"`
	// Mirroring, Stale and DataAge say how current the member's data is,
	// as in a PlacementReport: a stale member's answer is from what the
	// registry last saw of it.
	// +optional
	Mirroring MirroringState `json:"mirroring,omitempty"`
	Stale     bool           `json:"stale"`
	// +optional
	DataAge *metav1.Duration `json:"dataAge,omitempty"`
}

// QuotaResourceAnswer is one resource of the proposed quota in a member.
type QuotaResourceAnswer struct {
	// Name is the resource as the quota names it (requests.cpu).
	Name string `json:"name"`
	// Proposed is spec.hard's amount; Current what the namespace's quotas
	// promise now (the least hard of its quotas without scopes), absent
	// without one.
	Proposed resource.Quantity `json:"proposed"`
	// +optional
	Current *resource.Quantity `json:"current,omitempty"`
	// CommittedBefore is what the member's quotas promise now
	// (ClusterCapacity status.committed.hard), CommittedAfter the same with
	// the proposal in place of Current.
	CommittedBefore resource.Quantity `json:"committedBefore"`
	CommittedAfter  resource.Quantity `json:"committedAfter"`
	// Allocatable and Requested are the schedulable nodes' of the resource
	// the quota limits (requests.cpu and limits.cpu limit cpu); absent for
	// a resource no schedulable node has.
	// +optional
	Allocatable *resource.Quantity `json:"allocatable,omitempty"`
	// +optional
	Requested *resource.Quantity `json:"requested,omitempty"`
	// PercentAfter is CommittedAfter in percent of Allocatable, rounded
	// up; absent without allocatable.
	// +optional
	PercentAfter *int64 `json:"percentAfter,omitempty"`
	// MaxPercent is the policy's bound for the resource in this member
	// (--quota-max-overcommit); absent: unbounded.
	// +optional
	MaxPercent *int64 `json:"maxPercent,omitempty"`
	// Fits is true when CommittedAfter stays within MaxPercent of
	// Allocatable (always without a bound; never without allocatable under
	// a bound).
	Fits bool `json:"fits"`
}
