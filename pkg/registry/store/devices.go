package store

// The DRA (Dynamic Resource Allocation, resource.k8s.io) resources discovery
// mirrors when a member serves them.
const (
	ResourceResourceSlices Resource = "resourceslices"
	ResourceResourceClaims Resource = "resourceclaims"
)

// ResourceSlice is the part of a member ResourceSlice that device counts
// need: which node (if one) its devices are local to, their driver and pool,
// and the device names.
type ResourceSlice struct {
	Name string
	// NodeName is "" for devices not local to one node (spec.allNodes or
	// spec.nodeSelector): they count for the member, not for a node.
	NodeName string
	Driver   string
	Pool     string
	// PoolGeneration is spec.pool.generation: only the slices of a pool's
	// newest generation count, as the scheduler's.
	PoolGeneration int64
	Devices        []string
}

// DeviceRef names one device: a ResourceClaim's allocation result.
type DeviceRef struct {
	Driver string `json:"driver"`
	Pool   string `json:"pool"`
	Device string `json:"device"`
}

// ResourceClaim is the part of a member ResourceClaim that device counts
// need.
type ResourceClaim struct {
	Namespace string
	Name      string
	UID       string
	// Classes holds, per device class the claim's requests name, the
	// number of devices allocated to those requests (0 until allocated).
	Classes map[string]int64
	// Allocated are the devices status.allocation holds.
	Allocated []DeviceRef
}

// DeviceCount counts the DRA devices of one driver.
type DeviceCount struct {
	Total     int64 `json:"total"`
	Allocated int64 `json:"allocated"`
}

// ClaimCount counts a namespace's ResourceClaims of one device class and
// the devices allocated to their requests of it.
type ClaimCount struct {
	Claims  int64 `json:"claims"`
	Devices int64 `json:"devices"`
}

// APIState says whether a member serves an optional resource to discovery.
type APIState string

const (
	// APIServed: a list of the resource committed.
	APIServed APIState = "Served"
	// APIAbsent: the member does not serve the resource (404).
	APIAbsent APIState = "Absent"
	// APIForbidden: discovery's credentials may not list it (403).
	APIForbidden APIState = "Forbidden"
)

// MemberDevices are a member's DRA devices: whether it serves the API, and
// per driver the counts over every slice and the nodes with a device.
type MemberDevices struct {
	// API is APIServed when both DRA resources are, else the state of one
	// that is not.
	API     APIState
	Drivers map[string]DeviceCount
	Nodes   map[string]int64
}
