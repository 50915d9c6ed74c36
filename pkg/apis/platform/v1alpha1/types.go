package v1alpha1

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// +genclient
// +genclient:onlyVerbs=get,list,watch
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// ClusterNamespace describes one namespace of one member cluster, as the
// platform registry last observed it. It lives in the namespace it describes
// and is named after the cluster, so namespaced RBAC grants a tenant team its
// namespace in every cluster. Read-only.
type ClusterNamespace struct {
	metav1.TypeMeta `json:",inline"`
	// Standard object metadata. Labels are the member namespace's labels plus
	// platform.example.io/cluster.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Status is the observed state of the member namespace.
	// +optional
	Status ClusterNamespaceStatus `json:"status,omitempty"`
}

// NamespacePhase is a member namespace's lifecycle phase.
type NamespacePhase string

const (
	// NamespaceActive means the namespace is available for use.
	NamespaceActive NamespacePhase = "Active"
	// NamespaceTerminating means the namespace is being deleted.
	NamespaceTerminating NamespacePhase = "Terminating"
)

// ClusterNamespaceStatus is the observed state of a member namespace.
type ClusterNamespaceStatus struct {
	// Cluster is the id of the member cluster the namespace belongs to.
	Cluster string `json:"cluster"`
	// Phase is the namespace's lifecycle phase: Active or Terminating.
	Phase NamespacePhase `json:"phase"`
	// UID is the namespace's uid in the member cluster.
	// +optional
	UID types.UID `json:"uid,omitempty"`
	// CreationTimestamp is when the namespace was created in the member cluster.
	// +optional
	CreationTimestamp metav1.Time `json:"creationTimestamp,omitempty"`
	// PodCount is the number of non-terminal pods in the namespace.
	PodCount int64 `json:"podCount"`
	// Requests is the sum of the CPU and memory requests of the namespace's non-terminal pods.
	Requests ComputeResources `json:"requests"`
	// Usage is the namespace's measured usage: the sum of its pods'
	// metrics.k8s.io PodMetrics at the last reported scrape. It is reported,
	// not refreshed at every scrape: again when it moves by more than the
	// usage report threshold of the larger of the requests and the reported
	// usage, when the pods measured change, and once per report period.
	// Absent until the member's PodMetrics were scraped.
	// +optional
	Usage *NamespaceUsage `json:"usage,omitempty"`
	// Quotas are the namespace's ResourceQuotas with their hard limits and usage.
	// +optional
	// +listType=map
	// +listMapKey=name
	Quotas []ResourceQuotaStatus `json:"quotas,omitempty"`
	// DeviceClaims counts, per DRA device class, the namespace's
	// ResourceClaims with a request of the class, and the devices
	// allocated to those requests.
	// +optional
	// +listType=map
	// +listMapKey=deviceClassName
	DeviceClaims []DeviceClaimCount `json:"deviceClaims,omitempty"`
}

// DeviceClaimCount counts a namespace's ResourceClaims of one device class.
type DeviceClaimCount struct {
	// DeviceClassName is the DeviceClass the claims' requests name.
	DeviceClassName string `json:"deviceClassName"`
	// Claims is the number of ResourceClaims with a request of the class.
	Claims int64 `json:"claims"`
	// AllocatedDevices is the number of devices allocated to those requests.
	AllocatedDevices int64 `json:"allocatedDevices"`
}

// NamespaceUsage is a namespace's measured usage, next to its requests.
type NamespaceUsage struct {
	// CPU in cores and Memory in bytes: the sum over the pods measured.
	ComputeResources `json:",inline"`
	// Pods is how many pods had metrics (pods metrics-server has not
	// measured yet are missing from the sums).
	Pods int64 `json:"pods"`
	// Timestamp is when the newest pod sample was taken.
	Timestamp metav1.Time `json:"timestamp"`
	// CPUOfRequests and MemoryOfRequests are usage in percent of the
	// namespace's requests: above 100 it uses more than it asked for, far
	// below it holds capacity it does not use. Absent without requests.
	// +optional
	CPUOfRequests *int64 `json:"cpuOfRequests,omitempty"`
	// +optional
	MemoryOfRequests *int64 `json:"memoryOfRequests,omitempty"`
}

// ComputeResources is an amount of CPU and memory.
type ComputeResources struct {
	// CPU in cores (for example 1500m).
	CPU resource.Quantity `json:"cpu"`
	// Memory in bytes (for example 512Mi).
	Memory resource.Quantity `json:"memory"`
	// Other holds every other resource by its Kubernetes name
	// (ephemeral-storage, hugepages-<size>, extended resources such as
	// nvidia.com/gpu), in the resource's unit; absent means none.
	// +optional
	Other map[string]resource.Quantity `json:"other,omitempty"`
}

// ResourceQuotaStatus is one member ResourceQuota's hard limits and usage.
type ResourceQuotaStatus struct {
	// Name of the ResourceQuota.
	Name string `json:"name"`
	// Hard is the enforced limit per resource name.
	// +optional
	Hard map[string]resource.Quantity `json:"hard,omitempty"`
	// Used is the observed usage per resource name.
	// +optional
	Used map[string]resource.Quantity `json:"used,omitempty"`
	// Scopes are the quota's scopes: spec.scopes, then each expression of
	// spec.scopeSelector as "<scope> <operator>" followed by its values,
	// comma-separated ("PriorityClass In high,low"). Empty for a quota that
	// every pod of the namespace counts against.
	// +optional
	// +listType=atomic
	Scopes []string `json:"scopes,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// ClusterNamespaceList is a list of ClusterNamespace.
type ClusterNamespaceList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []ClusterNamespace `json:"items"`
}

// +genclient
// +genclient:nonNamespaced
// +genclient:onlyVerbs=get,list,watch
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// NodeCapacity combines one member node's capacity, the requests of the pods
// bound to it, its measured usage and its schedulability, as the platform
// registry last observed them. It is named <cluster id>.<node name>. Read-only.
type NodeCapacity struct {
	metav1.TypeMeta `json:",inline"`
	// Standard object metadata. Labels are the member node's labels plus
	// platform.example.io/cluster.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Status is the observed state of the member node.
	// +optional
	Status NodeCapacityStatus `json:"status,omitempty"`
}

// NodeCapacityStatus is the observed state of a member node.
type NodeCapacityStatus struct {
	// Cluster is the id of the member cluster the node belongs to.
	Cluster string `json:"cluster"`
	// NodeName is the node's name in the member cluster.
	NodeName string `json:"nodeName"`
	// Capacity is the node's total resources (status.capacity of the Node).
	Capacity NodeResources `json:"capacity"`
	// Allocatable is what pods may use (status.allocatable of the Node).
	Allocatable NodeResources `json:"allocatable"`
	// Requested is the sum of the requests of non-terminal pods bound to the
	// node; pods is their count.
	Requested NodeResources `json:"requested"`
	// Available is allocatable minus requested.
	Available NodeResources `json:"available"`
	// Usage is the node's latest measured usage from metrics.k8s.io; absent
	// when no sample exists (usage unknown, not zero).
	// +optional
	Usage *NodeUsage `json:"usage,omitempty"`
	// Schedulable is true when the node is Ready, not cordoned and has no
	// NoSchedule or NoExecute taint.
	Schedulable bool `json:"schedulable"`
	// UnschedulableReason says in one word why the node is not schedulable,
	// the first that applies: NotReady (its Ready condition is not True),
	// Cordoned (spec.unschedulable), Tainted (a NoSchedule or NoExecute
	// taint). Empty when the node is schedulable.
	// +optional
	UnschedulableReason UnschedulableReason `json:"unschedulableReason,omitempty"`
	// Unschedulable mirrors spec.unschedulable of the Node (cordoned).
	Unschedulable bool `json:"unschedulable"`
	// Ready is true when the node's Ready condition is True.
	Ready bool `json:"ready"`
	// Conditions are the node's conditions.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []NodeCondition `json:"conditions,omitempty"`
	// Taints are the node's taints.
	// +optional
	// +listType=atomic
	Taints []Taint `json:"taints,omitempty"`
	// Devices counts, per DRA driver, the devices the member's
	// ResourceSlices (resource.k8s.io) publish for this node and how many
	// of them are allocated to ResourceClaims. Only the newest generation
	// of each pool counts, as the scheduler's. Absent when no ResourceSlice
	// names the node (or the member does not serve resource.k8s.io: its
	// ClusterCapacity says so).
	// +optional
	// +listType=map
	// +listMapKey=driver
	Devices []DeviceCount `json:"devices,omitempty"`
}

// DeviceCount counts the DRA devices of one driver.
type DeviceCount struct {
	// Driver is the DRA driver publishing the devices (gpu.example.com).
	Driver string `json:"driver"`
	// Total is the number of devices published.
	Total int64 `json:"total"`
	// Allocated is how many of them are allocated to ResourceClaims.
	Allocated int64 `json:"allocated"`
	// Free is Total minus Allocated.
	Free int64 `json:"free"`
}

// UnschedulableReason says in one word why a node is not schedulable.
// +enum
type UnschedulableReason string

const (
	// UnschedulableNotReady: the node's Ready condition is not True.
	UnschedulableNotReady UnschedulableReason = "NotReady"
	// UnschedulableCordoned: the node is Ready and cordoned (spec.unschedulable).
	UnschedulableCordoned UnschedulableReason = "Cordoned"
	// UnschedulableTainted: the node is Ready, not cordoned, and has a
	// NoSchedule or NoExecute taint.
	UnschedulableTainted UnschedulableReason = "Tainted"
)

// NodeResources is an amount of CPU, memory and pods.
type NodeResources struct {
	// CPU in cores (for example 3920m).
	CPU resource.Quantity `json:"cpu"`
	// Memory in bytes (for example 15Gi).
	Memory resource.Quantity `json:"memory"`
	// Pods is a number of pods: the pod limit for capacity and allocatable,
	// the count of pods for requested, what is left for available.
	Pods int64 `json:"pods"`
	// Other holds every other resource the node reports or its pods
	// request, by its Kubernetes name: ephemeral-storage, hugepages-<size>
	// and extended resources such as nvidia.com/gpu, in the resource's unit
	// (bytes, devices). Absent means zero.
	// +optional
	Other map[string]resource.Quantity `json:"other,omitempty"`
}

// NodeUsage is a node's latest metrics.k8s.io sample.
type NodeUsage struct {
	// CPU used, averaged over the window.
	CPU resource.Quantity `json:"cpu"`
	// Memory working set.
	Memory resource.Quantity `json:"memory"`
	// Timestamp is when the sample was taken.
	Timestamp metav1.Time `json:"timestamp"`
	// Window is the interval the CPU usage was averaged over.
	Window metav1.Duration `json:"window"`
}

// NodeCondition is a member node's condition.
type NodeCondition struct {
	// Type of the condition, for example Ready or MemoryPressure.
	Type string `json:"type"`
	// Status of the condition: True, False or Unknown.
	Status string `json:"status"`
	// Reason is a machine-readable reason for the last transition.
	// +optional
	Reason string `json:"reason,omitempty"`
	// Message is a human-readable explanation.
	// +optional
	Message string `json:"message,omitempty"`
	// LastTransitionTime is when the status last changed.
	// +optional
	LastTransitionTime metav1.Time `json:"lastTransitionTime,omitempty"`
}

// Taint is a member node's taint.
type Taint struct {
	// Key of the taint.
	Key string `json:"key"`
	// Value of the taint.
	// +optional
	Value string `json:"value,omitempty"`
	// Effect: NoSchedule, PreferNoSchedule or NoExecute.
	Effect string `json:"effect"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// NodeCapacityList is a list of NodeCapacity.
type NodeCapacityList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []NodeCapacity `json:"items"`
}

// +genclient
// +genclient:nonNamespaced
// +genclient:onlyVerbs=get,list,watch
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// ClusterCapacity sums one member cluster's NodeCapacities and
// ClusterNamespaces: node counts, allocatable, requested, available and
// measured usage over its schedulable nodes and over all of them, the
// largest free CPU and memory on one schedulable node, and its pods and
// namespaces. The registry keeps it in the same transactions as the
// NodeCapacities it sums, so at any resourceVersion it equals their sum.
// It is named after the cluster. Read-only.
type ClusterCapacity struct {
	metav1.TypeMeta `json:",inline"`
	// Standard object metadata. Labels are platform.example.io/cluster
	// (members are registered without labels of their own).
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Status is the member's capacity, summed.
	// +optional
	Status ClusterCapacityStatus `json:"status,omitempty"`
}

// ClusterCapacityStatus is a member cluster's capacity, summed.
type ClusterCapacityStatus struct {
	// Cluster is the member cluster's id.
	Cluster string `json:"cluster"`
	// Nodes counts the member's nodes.
	Nodes NodeCounts `json:"nodes"`
	// Schedulable sums the schedulable nodes (Ready, not cordoned, no
	// NoSchedule or NoExecute taint): the capacity new pods can land on.
	Schedulable CapacitySummary `json:"schedulable"`
	// All sums every node.
	All CapacitySummary `json:"all"`
	// LargestFree is the most CPU and the most memory (each maximized on
	// its own) that one schedulable node has left: a pod requesting more
	// of either fits on no node. Other holds the same for every other
	// resource a schedulable node has (the most free nvidia.com/gpu on one
	// node, for example). Absent without a schedulable node.
	// +optional
	LargestFree *ComputeResources `json:"largestFree,omitempty"`
	// Pods counts the non-terminal pods of the member's namespaces,
	// scheduled or not.
	Pods int64 `json:"pods"`
	// Namespaces counts the member's namespaces.
	Namespaces int64 `json:"namespaces"`
	// Mirroring is how the registry's mirror of the member stands, as the
	// discovery replica holding the member last reported it.
	// +optional
	Mirroring MemberMirroring `json:"mirroring,omitempty"`
	// Devices counts the member's DRA devices per driver, over every
	// ResourceSlice (devices of one node and those shared by several).
	// Absent before discovery looked at the member's resource.k8s.io API.
	// +optional
	Devices *MemberDevices `json:"devices,omitempty"`
	// Committed is what the member's ResourceQuotas promise its namespaces,
	// summed over them, beside the schedulable allocatable: the member's
	// overcommit. Consistent with the ClusterNamespaces' quotas at every
	// resourceVersion. Absent while no namespace has a quota limiting pods.
	// +optional
	Committed *QuotaCommitment `json:"committed,omitempty"`
	// Conditions: HasSchedulableCapacity is True while some schedulable
	// node has CPU and memory left; Synced is True while the member's
	// mirroring is Synced (its reason is the state otherwise, NotReported
	// before discovery reported one).
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// QuotaCommitment sums, over a member's namespaces, what each namespace's
// ResourceQuotas promise its pods, per resource that quotas limit on pods:
// pods, requests.<resource> and limits.<resource> (requests.storage, a
// PersistentVolumeClaim's, is left out; cpu, memory and ephemeral-storage
// count as requests.cpu, requests.memory and requests.ephemeral-storage,
// as quota admission counts them).
//
// Quotas do not add up within a namespace: quota admission admits a pod
// only if it fits every quota of its namespace that matches it. So a
// namespace promises, per resource, the least hard among its quotas
// without scopes that limit it (every pod matches those), with that quota's
// used; that is counted in Hard and Used. Where only quotas with scopes
// (spec.scopes, spec.scopeSelector) limit a resource, each bounds only
// the pods it matches, pods matching none are not bounded, and the
// namespace's bound is unknown: the sum of those quotas' hard and used is
// counted in ScopedHard and ScopedUsed instead (an upper bound of what the
// scoped pods may take, above it when scopes overlap). Quotas with scopes
// in a namespace that also has an unscoped one for the resource are not
// counted: the unscoped one bounds the namespace.
type QuotaCommitment struct {
	// Hard sums, per resource, the namespaces' least unscoped hard.
	// +optional
	Hard map[string]resource.Quantity `json:"hard,omitempty"`
	// Used sums, per resource, the used of the quotas counted in Hard.
	// +optional
	Used map[string]resource.Quantity `json:"used,omitempty"`
	// ScopedHard sums, per resource, the hard of the quotas with scopes of
	// the namespaces that have no unscoped quota limiting it.
	// +optional
	ScopedHard map[string]resource.Quantity `json:"scopedHard,omitempty"`
	// ScopedUsed sums the used of the quotas counted in ScopedHard.
	// +optional
	ScopedUsed map[string]resource.Quantity `json:"scopedUsed,omitempty"`
	// PercentOfAllocatable is, per resource of Hard, Hard in percent of the
	// schedulable nodes' allocatable of the resource it limits
	// (requests.cpu and limits.cpu limit cpu, requests.<r> and limits.<r>
	// limit <r>, pods limits pods), rounded down: 125 is an overcommit of
	// 1.25. Absent for a resource the schedulable nodes have none of.
	// +optional
	PercentOfAllocatable map[string]int64 `json:"percentOfAllocatable,omitempty"`
}

// MemberDevices are a member's DRA devices.
type MemberDevices struct {
	// API is Served when the member serves resource.k8s.io/v1 and
	// discovery mirrors its ResourceSlices and ResourceClaims, Absent when
	// it does not serve them (no DRA there: Drivers is empty, not unknown),
	// Forbidden when discovery's credentials may not list them (grant
	// get, list and watch on resource.k8s.io resourceslices and
	// resourceclaims; until then the counts are unknown).
	API DeviceAPIState `json:"api"`
	// Drivers counts the devices per DRA driver.
	// +optional
	// +listType=map
	// +listMapKey=driver
	Drivers []MemberDeviceCount `json:"drivers,omitempty"`
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
	// Driver is the DRA driver publishing the devices.
	Driver string `json:"driver"`
	// Total is the number of devices published.
	Total int64 `json:"total"`
	// Allocated is how many of them are allocated to ResourceClaims.
	Allocated int64 `json:"allocated"`
	// Free is Total minus Allocated.
	Free int64 `json:"free"`
	// Nodes is the number of nodes with a device of the driver.
	Nodes int64 `json:"nodes"`
}

// MemberMirroring is how the registry's mirror of a member stands.
type MemberMirroring struct {
	// State of the mirroring; empty before discovery reported one.
	// +optional
	State MirroringState `json:"state,omitempty"`
	// Since is when the mirroring entered State.
	// +optional
	Since *metav1.Time `json:"since,omitempty"`
	// LastChangeTime is when the registry last mirrored a change of the
	// member, to a minute (a busy member's is reported once a minute): how
	// long ago the mirror last saw the member change. Unset before one.
	// +optional
	LastChangeTime *metav1.Time `json:"lastChangeTime,omitempty"`
	// LastUsageTime is when the newest metrics.k8s.io node sample the
	// registry recorded of the member was taken, to a minute: the member's
	// usage heartbeat. While a node's status.usage is set, it holds as of
	// this time to within the reporting threshold, however old its own
	// timestamp (the sample it last changed to). Unset before a sample.
	// +optional
	LastUsageTime *metav1.Time `json:"lastUsageTime,omitempty"`
	// CompleteAsOf is the member time up to which the registry holds every
	// change of every resource mirrored from the member (to a minute): the
	// arrival of the newest watch event or bookmark whose batch and cursor
	// committed, the minimum over the member's resources. The member's
	// owner heartbeats it once a minute through the registry writes it
	// vouches for; readers judge staleness from its age. Unset before the
	// first heartbeat.
	// +optional
	CompleteAsOf *metav1.Time `json:"completeAsOf,omitempty"`
	// DataAge is how old the mirror was when the object was read (now
	// minus CompleteAsOf), set when it is past the server's
	// --member-stale-after and State says Stale.
	// +optional
	DataAge *metav1.Duration `json:"dataAge,omitempty"`
}

// MirroringState is the state of a member's mirroring.
// +enum
type MirroringState string

const (
	// MirroringSyncing: a first list (or a relist) of the member is running.
	MirroringSyncing MirroringState = "Syncing"
	// MirroringSynced: every resource is listed and watched, and changes commit.
	MirroringSynced MirroringState = "Synced"
	// MirroringLagging: changes arrive from the member but a commit keeps failing.
	MirroringLagging MirroringState = "Lagging"
	// MirroringUnreachable: the member does not answer or refuses access.
	MirroringUnreachable MirroringState = "Unreachable"
	// MirroringStale: judged by the reader, whatever discovery last
	// recorded: the mirror's heartbeat (CompleteAsOf) is older than the
	// server's --member-stale-after, so nothing vouches for the data (the
	// member's writer may be unable to write).
	MirroringStale MirroringState = "Stale"
)

// NodeCounts counts a member's nodes. Cordoned and Tainted count every
// node with the flag, Ready or not, so they may overlap.
type NodeCounts struct {
	// Total counts every node.
	Total int64 `json:"total"`
	// Ready counts nodes whose Ready condition is True.
	Ready int64 `json:"ready"`
	// Schedulable counts Ready, uncordoned nodes without a NoSchedule or NoExecute taint.
	Schedulable int64 `json:"schedulable"`
	// Cordoned counts nodes with spec.unschedulable.
	Cordoned int64 `json:"cordoned"`
	// Tainted counts nodes with a NoSchedule or NoExecute taint.
	Tainted int64 `json:"tainted"`
	// WithResource counts, per resource besides cpu, memory and pods
	// (ephemeral-storage, hugepages-<size>, extended resources such as
	// nvidia.com/gpu), the nodes whose allocatable lists it.
	// +optional
	WithResource map[string]int64 `json:"withResource,omitempty"`
}

// CapacitySummary sums a set of nodes.
type CapacitySummary struct {
	// Allocatable sums the nodes' allocatable; pods is their pod limit.
	Allocatable NodeResources `json:"allocatable"`
	// Requested sums the requests of the non-terminal pods bound to the
	// nodes; pods is their count.
	Requested NodeResources `json:"requested"`
	// Available is allocatable minus requested.
	Available NodeResources `json:"available"`
	// Usage sums the nodes' reported usage (metrics.k8s.io); absent when
	// none of them has one.
	// +optional
	Usage *CapacityUsage `json:"usage,omitempty"`
}

// CapacityUsage sums the reported usage of the nodes that have one.
type CapacityUsage struct {
	// CPU used.
	CPU resource.Quantity `json:"cpu"`
	// Memory working set.
	Memory resource.Quantity `json:"memory"`
	// Nodes counts the nodes whose usage is summed (those with a reported sample).
	Nodes int64 `json:"nodes"`
}

// ClusterCapacity condition types and reasons.
const (
	// ClusterCapacitySynced is True while the member's mirroring is Synced.
	ClusterCapacitySynced = "Synced"
	// ReasonNotReported: discovery has not reported the member's mirroring state.
	ReasonNotReported = "NotReported"
	// ClusterCapacityHasRoom is True while some schedulable node has CPU and memory left.
	ClusterCapacityHasRoom = "HasSchedulableCapacity"
	// ReasonRoomLeft: some schedulable node has CPU and memory left.
	ReasonRoomLeft = "RoomLeft"
	// ReasonNoSchedulableNode: the member has no schedulable node.
	ReasonNoSchedulableNode = "NoSchedulableNode"
	// ReasonSchedulableFull: every schedulable node has no CPU or no memory left.
	ReasonSchedulableFull = "SchedulableNodesFull"
)

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// ClusterCapacityList is a list of ClusterCapacity.
type ClusterCapacityList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []ClusterCapacity `json:"items"`
}
