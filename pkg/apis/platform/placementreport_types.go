package platform

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// PlacementReport asks how many replicas of one pod shape each member
// cluster can take now, counted as kube-scheduler's filters would place
// them: create one and the answer is in the returned status (nothing is
// stored, as with a SubjectAccessReview). `kubectl create -f
// placement.yaml -o yaml`; RBAC verb create on placementreports, and get
// on the ClusterCapacity of every member named (list clustercapacities
// to ask a selector's members or the whole fleet). What is modelled and
// what is not: docs/placement.md.
type PlacementReport struct {
	metav1.TypeMeta
	metav1.ObjectMeta

	// Spec is the question: the pod shape and the members to consider.
	Spec PlacementReportSpec
	// Status is the answer, filled by the server.
	Status PlacementReportStatus
}

// PlacementReportSpec is one replica's scheduling requirements, in the
// words of a pod spec, and the members to consider.
type PlacementReportSpec struct {
	// Requests are one replica's resource requests, as a pod's (the sum
	// of its containers'): cpu, memory and any other resource by its
	// Kubernetes name (ephemeral-storage, hugepages-2Mi, nvidia.com/gpu).
	// Each replica is one pod, so pods is not a request.
	Requests map[string]resource.Quantity
	// Devices are the DRA devices one replica needs, per driver: that
	// many free devices of the driver on one node (see docs/placement.md
	// for how this differs from a DeviceClass).
	Devices []DeviceRequest
	// Replicas is how many replicas the workload wants: each member then
	// says whether all of them fit. Optional.
	Replicas int64
	// NodeSelector is the pod's nodeSelector: labels a node must have.
	NodeSelector map[string]string
	// NodeAffinity is the pod's requiredDuringSchedulingIgnoredDuringExecution
	// node affinity: a node must match one of the terms.
	NodeAffinity []NodeSelectorTerm
	// Tolerations are the pod's tolerations.
	Tolerations []Toleration
	// TopologySpread is one topology spread constraint with
	// whenUnsatisfiable DoNotSchedule over the replicas, for example by
	// topology.kubernetes.io/zone or kubernetes.io/hostname.
	TopologySpread *TopologySpread
	// Clusters names the members to consider. Excludes ClusterSelector;
	// neither means every member.
	Clusters []string
	// ClusterSelector selects the members whose ClusterCapacity labels
	// match it, as kubectl -l takes it.
	ClusterSelector string
}

// DeviceRequest asks DRA devices of one driver.
type DeviceRequest struct {
	// Driver is the DRA driver publishing the devices (gpu.example.com).
	Driver string
	// Count is how many devices one replica needs; at least 1.
	Count int64
}

// NodeSelectorTerm is a pod's node selector term: every requirement
// must hold.
type NodeSelectorTerm struct {
	// MatchExpressions are requirements on node labels.
	MatchExpressions []NodeSelectorRequirement
	// MatchFields are requirements on node fields: metadata.name only,
	// with In or NotIn, the name being the node's name in its member.
	MatchFields []NodeSelectorRequirement
}

// NodeSelectorRequirement is one requirement of a node selector term.
type NodeSelectorRequirement struct {
	// Key is the label key (or field) the requirement applies to.
	Key string
	// Operator is In, NotIn, Exists, DoesNotExist, Gt or Lt.
	Operator string
	// Values: one or more for In and NotIn, none for Exists and
	// DoesNotExist, one integer for Gt and Lt.
	Values []string
}

// Toleration is a pod's toleration.
type Toleration struct {
	// Key is the taint key it matches; empty with Exists matches every key.
	Key string
	// Operator is Equal (the default) or Exists.
	Operator string
	// Value is the taint value it matches (Equal only).
	Value string
	// Effect is the taint effect it matches; empty matches every effect.
	Effect string
}

// TopologySpread is a topology spread constraint over the replicas.
type TopologySpread struct {
	// TopologyKey is the node label whose values are the domains.
	TopologyKey string
	// MaxSkew is the most the replicas in two domains may differ by; at
	// least 1.
	MaxSkew int32
}

// PlacementReportStatus is the answer: how many replicas fit where.
type PlacementReportStatus struct {
	// Fits is how many replicas fit now over all the members considered
	// (each member counted on its own).
	Fits int64
	// Clusters has one entry per member considered, best first: the most
	// replicas, then current data before stale, then by name.
	Clusters []PlacementClusterFit
}

// PlacementClusterFit is how many replicas fit on one member.
type PlacementClusterFit struct {
	// Cluster is the member's id.
	Cluster string
	// Fits is how many replicas fit now, placed one after another on the
	// nodes that pass the filters (cordon, taints, selectors), within
	// each node's allocatable minus requested and its pod count, and
	// within the topology spread.
	Fits int64
	// Nodes counts the nodes that could take at least one replica; set
	// only for a caller who may list nodecapacities.
	Nodes *int64
	// FitsAll says whether spec.replicas replicas fit; unset without
	// spec.replicas.
	FitsAll *bool
	// Mirroring is the state of the registry's mirror of the member, as
	// on its ClusterCapacity; empty before discovery reported one.
	Mirroring MirroringState
	// Stale is true unless the mirroring is Synced: the answer is from
	// what the registry last saw of the member, not from now.
	Stale bool
	// DataAge is how long ago the mirror was last current (the time the
	// mirroring left Synced); unset while Synced or before a state was
	// reported.
	DataAge *metav1.Duration
}
