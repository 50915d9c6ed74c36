package platform

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// ClusterNamespace describes one namespace of one member cluster. It lives in
// the namespace it describes and is named after the cluster.
type ClusterNamespace struct {
	metav1.TypeMeta
	metav1.ObjectMeta

	Status ClusterNamespaceStatus
}

// NamespacePhase is a member namespace's lifecycle phase.
type NamespacePhase string

const (
	NamespaceActive      NamespacePhase = "Active"
	NamespaceTerminating NamespacePhase = "Terminating"
)

// ClusterNamespaceStatus is the observed state of a member namespace.
type ClusterNamespaceStatus struct {
	Cluster           string
	Phase             NamespacePhase
	UID               types.UID
	CreationTimestamp metav1.Time
	PodCount          int64
	Requests          ComputeResources
	Usage             *NamespaceUsage
	Quotas            []ResourceQuotaStatus
	DeviceClaims      []DeviceClaimCount
}

// DeviceClaimCount counts a namespace's ResourceClaims of one device class.
type DeviceClaimCount struct {
	DeviceClassName  string
	Claims           int64
	AllocatedDevices int64
}

// NamespaceUsage is a namespace's measured usage, next to its requests.
type NamespaceUsage struct {
	ComputeResources
	Pods             int64
	Timestamp        metav1.Time
	CPUOfRequests    *int64
	MemoryOfRequests *int64
}

// ComputeResources is an amount of CPU and memory.
type ComputeResources struct {
	CPU    resource.Quantity
	Memory resource.Quantity
	Other  map[string]resource.Quantity
}

// ResourceQuotaStatus is one member ResourceQuota's hard limits and usage.
type ResourceQuotaStatus struct {
	Name   string
	Hard   map[string]resource.Quantity
	Used   map[string]resource.Quantity
	Scopes []string
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// ClusterNamespaceList is a list of ClusterNamespace.
type ClusterNamespaceList struct {
	metav1.TypeMeta
	metav1.ListMeta

	Items []ClusterNamespace
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// NodeCapacity combines one member node's capacity, the requests of the pods
// bound to it, its measured usage and its schedulability. It is named
// <cluster id>.<node name>.
type NodeCapacity struct {
	metav1.TypeMeta
	metav1.ObjectMeta

	Status NodeCapacityStatus
}

// NodeCapacityStatus is the observed state of a member node.
type NodeCapacityStatus struct {
	Cluster             string
	NodeName            string
	Capacity            NodeResources
	Allocatable         NodeResources
	Requested           NodeResources
	Available           NodeResources
	Usage               *NodeUsage
	Schedulable         bool
	UnschedulableReason UnschedulableReason
	Unschedulable       bool
	Ready               bool
	Conditions          []NodeCondition
	Taints              []Taint
	Devices             []DeviceCount
}

// DeviceCount counts the DRA devices of one driver on a node.
type DeviceCount struct {
	Driver                 string
	Total, Allocated, Free int64
}

// UnschedulableReason says in one word why a node is not schedulable.
type UnschedulableReason string

const (
	UnschedulableNotReady UnschedulableReason = "NotReady"
	UnschedulableCordoned UnschedulableReason = "Cordoned"
	UnschedulableTainted  UnschedulableReason = "Tainted"
)

// NodeResources is an amount of CPU, memory and pods.
type NodeResources struct {
	CPU    resource.Quantity
	Memory resource.Quantity
	Pods   int64
	Other  map[string]resource.Quantity
}

// NodeUsage is a node's latest metrics.k8s.io sample.
type NodeUsage struct {
	CPU       resource.Quantity
	Memory    resource.Quantity
	Timestamp metav1.Time
	Window    metav1.Duration
}

// NodeCondition is a member node's condition.
type NodeCondition struct {
	Type               string
	Status             string
	Reason             string
	Message            string
	LastTransitionTime metav1.Time
}

// Taint is a member node's taint.
type Taint struct {
	Key    string
	Value  string
	Effect string
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// NodeCapacityList is a list of NodeCapacity.
type NodeCapacityList struct {
	metav1.TypeMeta
	metav1.ListMeta

	Items []NodeCapacity
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// ClusterCapacity sums one member cluster's NodeCapacities and
// ClusterNamespaces. It is named after the cluster.
type ClusterCapacity struct {
	metav1.TypeMeta
	metav1.ObjectMeta

	Status ClusterCapacityStatus
}

// ClusterCapacityStatus is a member cluster's capacity, summed.
type ClusterCapacityStatus struct {
	Cluster     string
	Nodes       NodeCounts
	Schedulable CapacitySummary
	All         CapacitySummary
	LargestFree *ComputeResources
	Pods        int64
	Namespaces  int64
	Mirroring   MemberMirroring
	Devices     *MemberDevices
	Committed   *QuotaCommitment
	Conditions  []metav1.Condition
}

// QuotaCommitment is what a member's ResourceQuotas promise its namespaces.
type QuotaCommitment struct {
	Hard                 map[string]resource.Quantity
	Used                 map[string]resource.Quantity
	ScopedHard           map[string]resource.Quantity
	ScopedUsed           map[string]resource.Quantity
	PercentOfAllocatable map[string]int64
}

// MemberDevices are a member's DRA devices.
type MemberDevices struct {
	API     DeviceAPIState
	Drivers []MemberDeviceCount
}

// DeviceAPIState says whether a member serves the DRA API.
type DeviceAPIState string

const (
	DeviceAPIServed DeviceAPIState = "Served"
	DeviceAPIAbsent DeviceAPIState = "Absent"
	// DeviceAPIForbidden: discovery's credentials may not list them.
	DeviceAPIForbidden DeviceAPIState = "Forbidden"
)

// MemberDeviceCount counts a member's DRA devices of one driver.
type MemberDeviceCount struct {
	Driver                        string
	Total, Allocated, Free, Nodes int64
}

// MemberMirroring is how the registry's mirror of the member stands.
type MemberMirroring struct {
	State          MirroringState
	Since          *metav1.Time
	LastChangeTime *metav1.Time
	LastUsageTime  *metav1.Time
	CompleteAsOf   *metav1.Time
	DataAge        *metav1.Duration
}

// MirroringState is the state of a member's mirroring.
type MirroringState string

const (
	MirroringSyncing     MirroringState = "Syncing"
	MirroringSynced      MirroringState = "Synced"
	MirroringLagging     MirroringState = "Lagging"
	MirroringUnreachable MirroringState = "Unreachable"
	MirroringStale       MirroringState = "Stale"
)

// NodeCounts counts a member's nodes.
type NodeCounts struct {
	Total        int64
	Ready        int64
	Schedulable  int64
	Cordoned     int64
	Tainted      int64
	WithResource map[string]int64
}

// CapacitySummary sums a set of nodes.
type CapacitySummary struct {
	Allocatable NodeResources
	Requested   NodeResources
	Available   NodeResources
	Usage       *CapacityUsage
}

// CapacityUsage sums the reported usage of the nodes that have one.
type CapacityUsage struct {
	CPU    resource.Quantity
	Memory resource.Quantity
	Nodes  int64
}

// ClusterCapacity condition types and reasons.
const (
	ClusterCapacitySynced   = "Synced"
	ReasonNotReported       = "NotReported"
	ClusterCapacityHasRoom  = "HasSchedulableCapacity"
	ReasonRoomLeft          = "RoomLeft"
	ReasonNoSchedulableNode = "NoSchedulableNode"
	ReasonSchedulableFull   = "SchedulableNodesFull"
)

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// ClusterCapacityList is a list of ClusterCapacity.
type ClusterCapacityList struct {
	metav1.TypeMeta
	metav1.ListMeta

	Items []ClusterCapacity
}
