package v1alpha1

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// +genclient
// +genclient:nonNamespaced
// +genclient:onlyVerbs=create
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
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the question: the pod shape and the members to consider.
	Spec PlacementReportSpec `json:"spec"`
	// Status is the answer, filled by the server.
	// +optional
	Status PlacementReportStatus `json:"status,omitempty"`
}

// PlacementReportSpec is one replica's scheduling requirements, in the
// words of a pod spec, and the members to consider.
//
// Its maps and lists are atomic: a query is created once, never applied or
// patched, and the server's field manager, which runs before validation,
// would otherwise track every key (a body of 100,000 requests took 21 s to
// be refused, 0.4 s atomic). Validation rejects duplicate drivers and
// members itself.
type PlacementReportSpec struct {
	// Requests are one replica's resource requests, as a pod's (the sum
	// of its containers'): cpu, memory and any other resource by its
	// Kubernetes name (ephemeral-storage, hugepages-2Mi, nvidia.com/gpu).
	// Each replica is one pod, so pods is not a request.
	// +optional
	// +mapType=atomic
	Requests map[string]resource.Quantity `json:"requests,omitempty"`
	// Devices are the DRA devices one replica needs, per driver: that
	// many free devices of the driver on one node (see docs/placement.md
	// for how this differs from a DeviceClass).
	// +optional
	// +listType=atomic
	Devices []DeviceRequest `json:"devices,omitempty"`
	// Replicas is how many replicas the workload wants: each member then
	// says whether all of them fit. Optional.
	// +optional
	Replicas int64 `json:"replicas,omitempty"`
	// NodeSelector is the pod's nodeSelector: labels a node must have.
	// +optional
	// +mapType=atomic
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`
	// NodeAffinity is the pod's requiredDuringSchedulingIgnoredDuringExecution
	// node affinity: a node must match one of the terms.
	// +optional
	// +listType=atomic
	NodeAffinity []NodeSelectorTerm `json:"nodeAffinity,omitempty"`
	// Tolerations are the pod's tolerations.
	// +optional
	// +listType=atomic
	Tolerations []Toleration `json:"tolerations,omitempty"`
	// TopologySpread is one topology spread constraint with
	// whenUnsatisfiable DoNotSchedule over the replicas, for example by
	// topology.kubernetes.io/zone or kubernetes.io/hostname.
	// +optional
	TopologySpread *TopologySpread `json:"topologySpread,omitempty"`
	// Clusters names the members to consider. Excludes ClusterSelector;
	// neither means every member.
	// +optional
	// +listType=atomic
	Clusters []string `json:"clusters,omitempty"`
	// ClusterSelector selects the members whose ClusterCapacity labels
	// match it, as kubectl -l takes it.
	// +optional
	ClusterSelector string `json:"clusterSelector,omitempty"`
}

// DeviceRequest asks DRA devices of one driver.
type DeviceRequest struct {
	// Driver is the DRA driver publishing the devices (gpu.example.com).
	Driver string `json:"driver"`
	// Count is how many devices one replica needs; at least 1.
	Count int64 `json:"count"`
}

// NodeSelectorTerm is a pod's node selector term: every requirement
// must hold.
type NodeSelectorTerm struct {
	// MatchExpressions are requirements on node labels.
	// +optional
	// +listType=atomic
	MatchExpressions []NodeSelectorRequirement `json:"matchExpressions,omitempty"`
	// MatchFields are requirements on node fields: metadata.name only,
	// with In or NotIn, the name being the node's name in its member.
	// +optional
	// +listType=atomic
	MatchFields []NodeSelectorRequirement `json:"matchFields,omitempty"`
}

// NodeSelectorRequirement is one requirement of a node selector term.
type NodeSelectorRequirement struct {
	// Key is the label key (or field) the requirement applies to.
	Key string `json:"key"`
	// Operator is In, NotIn, Exists, DoesNotExist, Gt or Lt.
	Operator string `json:"operator"`
	// Values: one or more for In and NotIn, none for Exists and
	// DoesNotExist, one integer for Gt and Lt.
	// +optional
	// +listType=atomic
	Values []string `json:"values,omitempty"`
}

// Toleration is a pod's toleration.
type Toleration struct {
	// Key is the taint key it matches; empty with Exists matches every key.
	// +optional
	Key string `json:"key,omitempty"`
	// Operator is Equal (the default) or Exists.
	// +optional
	Operator string `json:"operator,omitempty"`
	// Value is the taint value it matches (Equal only).
	// +optional
	Value string `json:"value,omitempty"`
	// Effect is the taint effect it matches; empty matches every effect.
	// +optional
	Effect string `json:"effect,omitempty"`
}

// TopologySpread is a topology spread constraint over the replicas.
type TopologySpread struct {
	// TopologyKey is the node label whose values are the domains.
	TopologyKey string `json:"topologyKey"`
	// MaxSkew is the most the replicas in two domains may differ by; at
	// least 1.
	MaxSkew int32 `json:"maxSkew"`
}

// PlacementReportStatus is the answer: how many replicas fit where.
type PlacementReportStatus struct {
	// Fits is how many replicas fit now over all the members considered
	// (each member counted on its own).
	Fits int64 `json:"fits"`
	// Clusters has one entry per member considered, best first: the most
	// replicas, then current data before stale, then by name.
	// +optional
	// +listType=map
	// +listMapKey=cluster
	Clusters []PlacementClusterFit `json:"clusters,omitempty"`
}

// PlacementClusterFit is how many replicas fit on one member.
type PlacementClusterFit struct {
	// Cluster is the member's id.
	Cluster string `json:"cluster"`
	// Fits is how many replicas fit now, placed one after another on the
	// nodes that pass the filters (cordon, taints, selectors), within
	// each node's allocatable minus requested and its pod count, and
	// within the topology spread.
	Fits int64 `json:"fits"`
	// Nodes counts the nodes that could take at least one replica; set
	// only for a caller who may list nodecapacities (how many nodes have
	// room is node-level information).
	// +optional
	Nodes *int64 `json:"nodes,omitempty"`
	// FitsAll says whether spec.replicas replicas fit; unset without
	// spec.replicas.
	// +optional
	FitsAll *bool `json:"fitsAll,omitempty"`
	// Mirroring is the state of the registry's mirror of the member, as
	// on its ClusterCapacity; empty before discovery reported one.
	// +optional
	Mirroring MirroringState `json:"mirroring,omitempty"`
	// Stale is true unless the mirroring is Synced: the answer is from
	// what the registry last saw of the member, not from now.
	Stale bool `json:"stale"`
	// DataAge is how long ago the mirror was last current (the time the
	// mirroring left Synced); unset while Synced or before a state was
	// reported.
	// +optional
	DataAge *metav1.Duration `json:"dataAge,omitempty"`
}
