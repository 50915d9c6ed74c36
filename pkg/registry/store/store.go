// Package store defines the registry's storage contract: the records discovery
// writes and the API reads, in plain numbers (millicores, bytes, counts). It
// knows nothing of Kubernetes API types; pkg/registry/<resource> turns its
// records into platform.example.io objects, and pkg/registry/postgres
// implements it on PostgreSQL.
package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
)

// Errors every implementation returns (wrapped) so the API layer can map them
// to Kubernetes status codes in one place.
var (
	// ErrNotFound: the object does not exist.
	ErrNotFound = errors.New("not found")
	// ErrInvalidContinue: a continue token that is malformed or was not issued by this registry.
	ErrInvalidContinue = errors.New("invalid continue token")
	// ErrExpiredContinue: a well-formed continue token that is too old to be honoured.
	ErrExpiredContinue = errors.New("continue token expired")
	// ErrInvalidSelector: a label or field requirement the store cannot evaluate
	// (for example status.schedulable=maybe).
	ErrInvalidSelector = errors.New("invalid selector")
	// ErrUnavailable: the database cannot be reached or its schema is not migrated.
	ErrUnavailable = errors.New("registry unavailable")
	// ErrRejected: the registry refused the data itself (a value it cannot
	// store, a constraint); retrying the same write cannot succeed.
	ErrRejected = errors.New("registry rejected the data")
	// ErrTooComplex: the database refused a statement as beyond its limits
	// (too many terms, too deep an expression); the same request cannot
	// succeed, a simpler one may.
	ErrTooComplex = errors.New("registry refused the request as too complex")
	// ErrBusy: the registry has no capacity for the request now (every
	// connection is in use); a BusyError says when to retry.
	ErrBusy = errors.New("registry busy")
	// ErrTimeout: the database cancelled a statement (statement_timeout,
	// a cancel request); retrying later may succeed.
	ErrTimeout = errors.New("registry timed out")
	// ErrFenced: the write carried an ownership epoch that is no longer the
	// member's (another replica claimed it, or it was removed); the write
	// did not land and the writer must stop mirroring the member.
	ErrFenced = errors.New("member claimed by another writer")
	// ErrRewound: the registry database failed over since the writer
	// claimed the member, and the failover may have lost the writer's last
	// writes; the write did not land and the writer must claim the member
	// again and resume from the cursors the registry holds.
	ErrRewound = errors.New("registry failed over since the member was claimed")
	// ErrMemberRemoved: the registry removed the member (no replica's
	// configuration listed it for the removal grace period); it is claimed
	// again only once a configuration lists it anew (MembersView.Listed).
	ErrMemberRemoved = errors.New("member removed from the registry")
)

// BusyError is an ErrBusy with a message and a retry delay.
type BusyError struct {
	Message           string
	RetryAfterSeconds int
}

func (e *BusyError) Error() string { return "registry busy: " + e.Message }

// Is makes errors.Is(err, ErrBusy) true.
func (e *BusyError) Is(target error) bool { return target == ErrBusy }

// Fence is a writer's ownership token for one member cluster: the epoch
// ClaimMember returned. A write carrying it lands only while the epoch is
// still the member's, checked in the write's own transaction. Epoch 0 is the
// epoch of a member nobody has claimed (writers other than discovery, such
// as tests and seeding tools). Failovers is the registry's failover count
// at the claim: a fenced write after a later failover fails with ErrRewound.
type Fence struct {
	ClusterID string
	Epoch     int64
	Failovers int64
}

// Resource names one kind of member-cluster object that discovery mirrors.
type Resource string

const (
	ResourceNamespaces     Resource = "namespaces"
	ResourceNodes          Resource = "nodes"
	ResourcePods           Resource = "pods"
	ResourceResourceQuotas Resource = "resourcequotas"
)

// Quantities are amounts of a node's resources, each a whole number of its
// unit (Kubernetes' resource quantities: capacity, allocatable, requests,
// usage). Pods is a pod count (capacity, allocatable) or the number of pods
// making up a request sum. Not to be confused with Resource, a resource
// discovery mirrors, nor with Amount, a field selector's keyed amount.
type Quantities struct {
	CPUMillis   int64
	MemoryBytes int64
	Pods        int64
	// Other holds every other resource by its Kubernetes name
	// (ephemeral-storage, hugepages-<size>, extended resources such as
	// nvidia.com/gpu) as a whole number of its unit (bytes, devices);
	// absent means zero.
	Other map[string]int64
}

// NodeCondition mirrors a member node's condition.
type NodeCondition struct {
	Type               string    `json:"type"`
	Status             string    `json:"status"`
	Reason             string    `json:"reason,omitempty"`
	Message            string    `json:"message,omitempty"`
	LastTransitionTime time.Time `json:"lastTransitionTime"`
}

// Taint mirrors a member node's taint.
type Taint struct {
	Key    string `json:"key"`
	Value  string `json:"value,omitempty"`
	Effect string `json:"effect"`
}

// Node is a member cluster's node as discovery records it.
type Node struct {
	Name          string
	UID           string
	Labels        map[string]string
	CreatedAt     time.Time
	Capacity      Quantities
	Allocatable   Quantities
	Unschedulable bool
	Ready         bool
	Conditions    []NodeCondition
	Taints        []Taint
}

// Namespace is a member cluster's namespace as discovery records it.
type Namespace struct {
	Name      string
	UID       string
	Labels    map[string]string
	CreatedAt time.Time
	Phase     string // Active or Terminating
}

// Pod is the part of a non-terminal member pod that requests and counts need.
type Pod struct {
	Namespace          string
	Name               string
	UID                string
	NodeName           string // empty while unscheduled
	Phase              string
	CPURequestMillis   int64
	MemoryRequestBytes int64
	// OtherRequests are the pod's requests of every other resource, as
	// Quantities.Other holds them.
	OtherRequests map[string]int64
}

// Quota is a member ResourceQuota; quantities are kept as their canonical strings.
type Quota struct {
	Namespace string            `json:"-"`
	Name      string            `json:"name"`
	Hard      map[string]string `json:"hard,omitempty"`
	Used      map[string]string `json:"used,omitempty"`
	// Scopes are the quota's scopes (spec.scopes, then each expression of
	// spec.scopeSelector as "<scope> <operator>[ <values, comma-separated>]");
	// empty for a quota every pod of its namespace counts against.
	Scopes []string `json:"scopes,omitempty"`
}

// ObjectKey names a member object; Namespace is empty for cluster-scoped
// resources (namespaces, nodes).
type ObjectKey struct {
	Namespace string
	Name      string
}

// Keys are object keys per member resource.
type Keys map[Resource][]ObjectKey

// NodeMetricsSample is one metrics.k8s.io NodeMetrics reading.
type NodeMetricsSample struct {
	ClusterID    string
	Node         string
	CPUNanoCores int64
	MemoryBytes  int64
	ObservedAt   time.Time
	Window       time.Duration
}

// Usage is a node's reported metrics sample (see UsageReporting).
type Usage struct {
	CPUNanoCores int64
	MemoryBytes  int64
	Timestamp    time.Time
	Window       time.Duration
}

// NodeCapacity is the computed per-node view: the node plus the sums of
// requests of its non-terminal pods (Requested.Pods is their count) and its
// reported usage sample (nil while unknown).
type NodeCapacity struct {
	ClusterID   string
	Node        Node
	Requested   Quantities
	Usage       *Usage
	Schedulable bool
	// UnschedulableReason says why the node is not schedulable ("" when it is).
	UnschedulableReason string
	// Devices counts the DRA devices of ResourceSlices local to the node,
	// per driver.
	Devices         map[string]DeviceCount
	FirstSeen       time.Time
	ResourceVersion int64
}

// Why a node is not schedulable, one word, by precedence: a node that is
// not Ready is NotReady whatever else holds, a cordoned Ready node is
// Cordoned, and a Ready, uncordoned node with a NoSchedule or NoExecute
// taint is Tainted. PreferNoSchedule does not make a node unschedulable.
const (
	ReasonNotReady = "NotReady"
	ReasonCordoned = "Cordoned"
	ReasonTainted  = "Tainted"
)

// UnschedulableReason is the node's reason not to be schedulable, ""
// when it is schedulable. The registry computes the same in SQL
// (cluster_node.unschedulable_reason, migration 008); a test holds the two
// to agreement.
func (n *Node) UnschedulableReason() string {
	switch {
	case !n.Ready:
		return ReasonNotReady
	case n.Unschedulable:
		return ReasonCordoned
	}
	for _, t := range n.Taints {
		if t.Effect == "NoSchedule" || t.Effect == "NoExecute" {
			return ReasonTainted
		}
	}
	return ""
}

// ClusterNamespace is the computed per-namespace view.
type ClusterNamespace struct {
	ClusterID string
	Namespace Namespace
	PodCount  int64
	Requested Quantities // CPUMillis and MemoryBytes of non-terminal pods
	// Usage is the namespace's reported usage (nil while unknown).
	Usage  *NamespaceUsage
	Quotas []Quota
	// DeviceClaims counts the namespace's ResourceClaims per device class.
	DeviceClaims    map[string]ClaimCount
	FirstSeen       time.Time
	ResourceVersion int64
}

// ClusterCapacity is the computed per-member view: its nodes and namespaces
// summed, kept by the registry in the transactions that change them.
type ClusterCapacity struct {
	ClusterID string
	Labels    map[string]string
	// Node counts; Cordoned and Tainted count every node with the flag
	// (NoSchedule or NoExecute taints), so they may overlap.
	Nodes, NodesReady, NodesSchedulable, NodesCordoned, NodesTainted int64
	// NodesWith counts, per other resource (Quantities.Other), the nodes
	// whose allocatable lists it.
	NodesWith map[string]int64
	// All sums every node, Schedulable the schedulable ones.
	All, Schedulable CapacitySums
	// MaxFree is the most CPU and the most memory (each on its own) that
	// one schedulable node has left, and in Other the same per other
	// resource; nil without a schedulable node.
	MaxFree *Quantities
	// HasRoom: some schedulable node has CPU and memory left; since
	// HasRoomSince.
	HasRoom      bool
	HasRoomSince time.Time
	// Namespaces and the non-terminal pods in them, scheduled or not.
	Namespaces, Pods int64
	// Mirroring is the member's mirroring state as its discovery writer
	// last reported it ("" before a report), since MirroringSince.
	Mirroring      MemberState
	MirroringSince time.Time
	// LastChange is when the registry last mirrored a change of the member
	// (to a minute); zero before one was reported.
	LastChange time.Time
	// LastUsage is when the newest node metrics sample recorded of the
	// member was taken (to a minute): its usage heartbeat; zero before one.
	LastUsage time.Time
	// CompleteAsOf is the member time up to which the registry holds every
	// change of every resource mirrored (to a minute): the mirror's
	// heartbeat, whose age readers judge staleness by; zero before one.
	CompleteAsOf time.Time
	// Devices are the member's DRA devices; nil before discovery looked
	// at its resource.k8s.io API.
	Devices *MemberDevices
	// Committed is what the member's ResourceQuotas promise its namespaces.
	Committed       QuotaCommitment
	FirstSeen       time.Time
	ResourceVersion int64
}

// QuotaCommitment sums, per resource that ResourceQuotas limit on pods
// (pods, requests.<resource>, limits.<resource>; cpu, memory and
// ephemeral-storage as requests.<them>), what each namespace's quotas
// promise, as the registry computes it (registry_quota_commitment): Hard
// and Used over the namespaces where a quota without scopes limits the
// resource (the least such hard, and that quota's used), ScopedHard and
// ScopedUsed over those where only quotas with scopes do (the sums of
// theirs). Amounts are decimal texts in the resource's base unit (cores,
// bytes, pods: "0.5", "2147483648"); a zero sum is left out.
type QuotaCommitment struct {
	Hard, Used, ScopedHard, ScopedUsed map[string]string
}

// MemberStatus is what a member's writer reports of its mirroring: the
// state, when it last mirrored a change, when the newest node metrics
// sample it recorded was taken, and the member time up to which every
// change is committed (zero: none to report).
type MemberStatus struct {
	State        MemberState
	LastChange   time.Time
	LastUsage    time.Time
	CompleteAsOf time.Time
}

// MemberState is how the mirroring of a member stands, as its writer sees it.
type MemberState string

const (
	// MemberSyncing: a first list (or a relist) is running.
	MemberSyncing MemberState = "Syncing"
	// MemberSynced: every resource is listed and watched, changes commit.
	MemberSynced MemberState = "Synced"
	// MemberLagging: changes arrive but a commit keeps failing.
	MemberLagging MemberState = "Lagging"
	// MemberUnreachable: the member does not answer or refuses access.
	MemberUnreachable MemberState = "Unreachable"
)

// CapacitySums are sums over a set of nodes. Requested.Pods counts the
// non-terminal pods bound to them; the usage sums are over the UsageNodes
// among them that have a reported usage.
type CapacitySums struct {
	Allocatable       Quantities
	Requested         Quantities
	UsageCPUNanoCores int64
	UsageMemoryBytes  int64
	UsageNodes        int64
}

// FieldColumns is a selectable field as the registry matches it: its path,
// the columns of its kind's table and the values they may hold, no getter.
// The kind declares the field once (registry.Field, with the getter that
// watches filter with) and derives this from it.
type FieldColumns struct {
	// Path is the field's path in the API object, for messages.
	Path string
	// Columns are the columns of the kind's table the value is matched
	// against: one, or two matched against the value split at its first
	// dot (a NodeCapacity's name is <cluster>.<node>).
	Columns []string
	// Bool fields take only "true" or "false".
	Bool bool
	// Values, when set, are the only values the field can hold.
	Values []string
	// Amount, when set, makes the field a family of keyed amounts (no
	// Columns): Path is their prefix, ending in a dot; a requirement's Key
	// is what follows it (a resource name) and its Value a base-10 int64.
	Amount *Amount
}

// Amount is a whole-number amount by key, read from jsonb objects of whole
// numbers keyed by it (a key an object lacks counts 0): Column's, minus
// Minus's when Minus is set (allocatable_other minus requested_other).
type Amount struct {
	Column, Minus string
}

// FieldRequirement is one field-selector term; Op is selection.Equals,
// selection.DoubleEquals or selection.NotEquals.
type FieldRequirement struct {
	Field FieldColumns
	Op    selection.Operator
	Value string
	// Key is what follows an Amount field's prefix in the selector's path.
	Key string
}

// ValidateValue checks the value against what the field can hold, so a
// list and a watch refuse the same selectors: a Bool field's value is
// "true" or "false", a field with Values one of them, an Amount field's a
// whole number (the API normalizes quantities to one) under a key.
func (f FieldRequirement) ValidateValue() error {
	if f.Field.Bool && f.Value != "true" && f.Value != "false" {
		return fmt.Errorf("%w: field selector %s: value %q is not \"true\" or \"false\"", ErrInvalidSelector, f.Field.Path, f.Value)
	}
	if len(f.Field.Values) > 0 && !slices.Contains(f.Field.Values, f.Value) {
		quoted := make([]string, len(f.Field.Values))
		for i, v := range f.Field.Values {
			quoted[i] = strconv.Quote(v)
		}
		return fmt.Errorf("%w: field selector %s: value %q is not one of %s", ErrInvalidSelector, f.Field.Path, f.Value, strings.Join(quoted, ", "))
	}
	if f.Field.Amount != nil {
		if f.Key == "" {
			return fmt.Errorf("%w: field selector %s: no key after the prefix", ErrInvalidSelector, f.Field.Path)
		}
		if _, err := strconv.ParseInt(f.Value, 10, 64); err != nil {
			return fmt.Errorf("%w: field selector %s%s: value %q is not a whole number", ErrInvalidSelector, f.Field.Path, f.Key, f.Value)
		}
	}
	return nil
}

// ListOptions selects and pages a list. Label requirements are evaluated in
// SQL; the synthetic label platform.example.io/cluster matches the cluster id.
type ListOptions struct {
	Labels labels.Requirements
	Fields []FieldRequirement
	// Limit caps the page size; 0 means everything.
	Limit int64
	// Continue is an opaque token from a previous page of the same list.
	Continue string
	// Freshness says how recent the data must be; a store that reads
	// from replicas (standbys) serves from one only when it has replayed
	// far enough, else from the primary.
	Freshness Freshness
}

// Source reads one kind's records by the kind's API names: one record by
// the request namespace ("" for cluster-scoped kinds) and object name, a
// page, or a stream of keyset pages (see Reader); Key places a record in
// the order of both.
type Source[R any] struct {
	// Kind names the records in the change feed (Change.Kind): a watch
	// of the source follows the changes of its kind.
	Kind   Kind
	Get    func(ctx context.Context, namespace, name string) (*R, error)
	List   func(ctx context.Context, opts ListOptions) (*Page[R], error)
	Stream func(ctx context.Context, opts ListOptions, pageSize int, yield func(StreamPage[R]) error) error
	Key    func(*R) ListKey
}

// All reads every record opts selects, page after page of pageSize
// (each page's continue token from the one before).
func (s Source[R]) All(ctx context.Context, opts ListOptions, pageSize int64) ([]R, error) {
	opts.Limit = pageSize
	var out []R
	for {
		page, err := s.List(ctx, opts)
		if err != nil {
			return nil, err
		}
		out = append(out, page.Items...)
		if opts.Continue = page.Continue; opts.Continue == "" {
			return out, nil
		}
	}
}

// ListKey is a record's place in its kind's list order: the two key
// columns, compared bytewise (COLLATE "C", as Go compares strings), the
// first one first.
type ListKey [2]string

// Compare orders keys as lists do: -1, 0 or +1.
func (k ListKey) Compare(o ListKey) int {
	if c := strings.Compare(k[0], o[0]); c != 0 {
		return c
	}
	return strings.Compare(k[1], o[1])
}

// StreamPage is one page of a stream, read in a short transaction of its
// own at ResourceVersion: the matching records after the previous page's
// last key up to and including its own last one, or, on the Final page
// (maybe empty), every matching record after the previous page. Pages come
// in key order and their versions never decrease.
type StreamPage[R any] struct {
	Items           []R
	ResourceVersion int64
	Final           bool
}

// Freshness is how recent a read must be.
type Freshness struct {
	// Latest: at least the registry's present when the read starts (a
	// list or watch without resourceVersion), so no client ever sees a
	// resourceVersion older than one already served, by any replica.
	Latest bool
	// AtLeast: at least this resourceVersion (a list at resourceVersion
	// N, a continue token's snapshot). Zero with Latest unset: any.
	AtLeast int64
}

// Page is one page of a list.
type Page[T any] struct {
	Items []T
	// ResourceVersion is the registry's resourceVersion (its published present) the list reflects.
	ResourceVersion int64
	// Continue is set when more items follow.
	Continue string
	// RemainingItemCount counts the items after this page, when known.
	RemainingItemCount *int64
}

// Batch is a set of changes to one member cluster committed atomically,
// together with the discovery cursors they reach.
type Batch struct {
	ClusterID string
	// Epoch and Failovers fence the batch: it lands only if Epoch is the
	// member's current ownership epoch and, for Epoch > 0, no failover
	// happened since the claim (see Fence).
	Epoch     int64
	Failovers int64

	// The records to write, one slot per member resource.
	Namespaces []Namespace
	Nodes      []Node
	Pods       []Pod
	Quotas     []Quota
	Slices     []ResourceSlice
	Claims     []ResourceClaim
	// Deleted holds the keys of the objects to delete, per resource.
	Deleted Keys

	// Replace lists resources this batch carries in full (a relist): rows of
	// those resources in this cluster that the batch does not contain, and
	// whose keys are not in Present, are deleted.
	Replace []Resource
	// Present holds the keys of a Replace resource's objects that earlier
	// batches of the same relist already wrote, so a large relist commits in
	// chunks and only its last batch carries Replace (Namespace is empty
	// for cluster-scoped kinds).
	Present []ObjectKey
	// Chunk marks a relist's batch that more batches of the same relist
	// follow (the last one carries Replace and Present). The aggregates its
	// member rows (pods, quotas, DRA) change on nodes and namespaces wait
	// for the relist's last batch, which recomputes those of every node and
	// namespace of the member: until it commits, they reflect the member
	// rows before the relist.
	Chunk bool
	// Cursors are the member resourceVersions the batch reaches, per resource.
	Cursors map[Resource]string
	// Unserved lists resources the member does not serve to discovery, and
	// why (APIAbsent, APIForbidden): their rows are deleted, as a relist
	// that found none would, and the member's views say so until a batch
	// replaces them. Only optional resources (DRA) can be unserved.
	Unserved map[Resource]APIState
}

// Writer is what discovery writes through.
type Writer interface {
	// ClaimMember makes owner the writer of a member cluster and returns
	// the member's new epoch, which fences out every earlier owner's writes
	// (they fail with ErrFenced). It waits for a write in flight to finish.
	ClaimMember(ctx context.Context, clusterID, owner string) (Fence, error)
	// Apply commits the batch and its cursors, stamping every changed view
	// object with the next registry resourceVersion. A batch commits in one
	// transaction, but for two that commit in several, the cursors last: one
	// with more namespaces and nodes than a views section holds (125)
	// commits those beyond its last 125 first, in parts of 125, and a
	// relist's last batch of member rows (Replace of pods, quotas or DRA)
	// commits in steps: its rows, then the aggregates of every node and
	// namespace of the member in parts, then its cursors. Until the cursors
	// commit, the batch is not done.
	Apply(ctx context.Context, b Batch) error
	// Cursor returns the persisted member resourceVersion for a resource, "" if none.
	Cursor(ctx context.Context, clusterID string, r Resource) (string, error)
	// CheckMemberIdentity records the identity of a member cluster (e.g. its
	// kube-system namespace uid). When a different identity was recorded, the
	// member's cursors are dropped in the same transaction, so discovery
	// relists instead of resuming from versions another cluster issued; it
	// reports whether that happened.
	CheckMemberIdentity(ctx context.Context, f Fence, identity string) (changed bool, err error)
	// ReconcileMembers records one replica's view of the configured
	// members and removes, once, each member no view has listed for the
	// grace period: in one transaction its objects are deleted (one
	// DELETED each), its owner is fenced out and the removal is recorded,
	// so no replica claims it again until a view lists it anew. Its usage
	// history stays, to expire with the retention.
	ReconcileMembers(ctx context.Context, v MembersView) (MembersReconciled, error)
	// Clusters returns the ids of every member cluster with rows and not
	// removed, so a member removed while discovery was not running can be
	// cleaned up.
	Clusters(ctx context.Context) ([]string, error)
	// RecordNodeMetrics stores the samples of nodes the registry knows in
	// the metrics history, ignoring duplicates of (cluster, node,
	// observed_at), and reports a node's newest sample on its NodeCapacity
	// when the policy says its usage moved or got old. Only reported nodes
	// take a new resourceVersion; reporting is fenced, and every sample must
	// be of the fence's member.
	RecordNodeMetrics(ctx context.Context, f Fence, samples []NodeMetricsSample, policy UsageReporting) (MetricsRecorded, error)
	// RecordNamespaceMetrics reports the usage of member namespaces on
	// their ClusterNamespaces when the policy says it moved or got old, and
	// returns how many it reported. It is fenced; every sample must be of
	// the fence's member.
	RecordNamespaceMetrics(ctx context.Context, f Fence, samples []NamespaceMetricsSample, policy UsageReporting) (int64, error)
	// RecordMemberState records the member's mirroring state, shown on its
	// ClusterCapacity (created if the member has none yet); only a change
	// takes a resourceVersion. It is fenced.
	RecordMemberState(ctx context.Context, f Fence, status MemberStatus) error
	// MaintainNodeMetrics is the registry-wide housekeeping of the metrics
	// history, run on an interval: it prepares the history for the coming
	// samples, drops history observed before RetainAfter (in whole
	// partitions), and makes usage reported before UnknownBefore unknown.
	// Every replica calls it; one round per Interval runs.
	MaintainNodeMetrics(ctx context.Context, m MetricsMaintenance) (MetricsMaintained, error)
}

// MembersView is what one replica's configuration says of the members.
type MembersView struct {
	// Configured are the members it lists.
	Configured []string
	// Listed are those of Configured it lists anew (its first view, or
	// back after a view without them): a removed one is removed no more.
	Listed []string
	// Unconfigured are members it knows (mirrored earlier, or found in the
	// registry) but no longer lists: they are absent from the first view
	// that missed them, until a view lists them again.
	Unconfigured []string
	// Grace is how long a member stays absent before it is removed.
	Grace time.Duration
}

// MembersReconciled is the registry's answer about a view's Unconfigured
// members.
type MembersReconciled struct {
	// Absent are those not removed (yet), with the time since which no
	// view has listed them.
	Absent map[string]time.Time
	// Removed are those removed, by this call or earlier.
	Removed []string
	// RemovedNow are those of Removed this call removed.
	RemovedNow []string
}

// UsageReporting decides when a node's (or namespace's) reported usage
// changes: only when usage moved meaningfully or it became unknown, so a
// quiet fleet causes no changes and no watch events; the member's usage
// heartbeat (MemberStatus.LastUsage) says how fresh the reported values
// are.
type UsageReporting struct {
	// Threshold is how far CPU or memory usage must move from the reported
	// value, as a fraction of the node's allocatable, to be reported (0:
	// any change).
	Threshold float64
	// Period, when set, is the age, relative to a new sample, at which the
	// reported sample is replaced even if usage did not move (opt-in, as
	// the kubelet's nodeStatusReportFrequency); 0 never replaces it.
	Period time.Duration
	// UnknownAfter is how long a node or namespace the scrapes lack may
	// keep its reported usage before it is shown as unknown (0: until
	// MaintainNodeMetrics finds it unconfirmed).
	UnknownAfter time.Duration
}

// MetricsRecorded says what RecordNodeMetrics did.
type MetricsRecorded struct {
	// Stored counts samples new to the history.
	Stored int64
	// Reported counts nodes whose reported usage changed.
	Reported int64
}

// MetricsMaintenance parameterizes MaintainNodeMetrics.
type MetricsMaintenance struct {
	// Now is the time the history is prepared from.
	Now time.Time
	// RetainAfter: history observed before it may be dropped.
	RetainAfter time.Time
	// UnknownBefore: a node or namespace whose reported usage nothing
	// confirmed since (its member's usage heartbeat for a node, a sample
	// in its history for a namespace) shows it as unknown.
	UnknownBefore time.Time
	// Interval is how often a round runs, registry-wide: a call within
	// Interval of the last round (by any replica) does nothing.
	Interval time.Duration
}

// MetricsMaintained says what MaintainNodeMetrics did.
type MetricsMaintained struct {
	// Skipped: another call ran a round less than Interval ago.
	Skipped bool
	// DroppedPartitions counts history partitions dropped.
	DroppedPartitions int
	// Unknown counts nodes and namespaces whose reported usage became unknown.
	Unknown int64
}

// ErrCompacted: a resourceVersion older than the retained change history.
var ErrCompacted = errors.New("resourceVersion compacted")

// ChangeType says what a change did to a view object.
type ChangeType string

const (
	ChangeAdded    ChangeType = "ADDED"
	ChangeModified ChangeType = "MODIFIED"
	ChangeDeleted  ChangeType = "DELETED"
)

// Kind names a view kind in the change feed.
type Kind string

const (
	KindNodeCapacity     Kind = "NodeCapacity"
	KindClusterNamespace Kind = "ClusterNamespace"
	KindClusterCapacity  Kind = "ClusterCapacity"
)

// Change is one entry of the change feed: a view object as of
// ResourceVersion (its last state for a deletion) and, when the object
// existed before this change, its state just before, so watchers can tell an
// object that stopped matching their selector.
type Change struct {
	ResourceVersion int64
	Type            ChangeType
	Kind            Kind
	// ClusterID is the member the changed object belongs to.
	ClusterID string

	// Object is the record after the change (for a deletion: the last
	// one, at the deletion's version) and Prev the one before it (nil for
	// an addition): pointers to the Kind's record type (*NodeCapacity,
	// *ClusterNamespace, *ClusterCapacity, ...).
	Object, Prev any
	// Size approximates the memory the change holds, in bytes: the
	// change feed's window is bounded by it.
	Size int
}

// Records returns a change's records as the kind's record type R; nil
// where the change has none or they are not Rs.
func Records[R any](c *Change) (cur, prev *R) {
	cur, _ = c.Object.(*R)
	prev, _ = c.Prev.(*R)
	return cur, prev
}

// ChangeFilter narrows a read of the change feed to the changes a watch
// can want; a zero field matches every change. A ClusterID needs a Kind
// (Changes refuses a member filter across kinds).
type ChangeFilter struct {
	Kind Kind
	// Kinds, when not empty, admits the changes of these kinds only (the
	// change-feed follower reads just the kinds it has watchers of); it
	// cannot be combined with Kind or ClusterID.
	Kinds []Kind
	// ClusterID is the member the changed object belongs to.
	ClusterID string
}

// Matches reports whether c passes the filter.
func (f ChangeFilter) Matches(c *Change) bool {
	return (f.Kind == "" || c.Kind == f.Kind) && (len(f.Kinds) == 0 || slices.Contains(f.Kinds, c.Kind)) &&
		(f.ClusterID == "" || c.ClusterID == f.ClusterID)
}

// Validate refuses a filter Changes cannot read: a member across kinds, or
// Kinds beside Kind or ClusterID.
func (f ChangeFilter) Validate() error {
	switch {
	case len(f.Kinds) > 0 && (f.Kind != "" || f.ClusterID != ""):
		return fmt.Errorf("a change filter of kinds %v cannot also name a kind or a member", f.Kinds)
	case f.Kind == "" && f.ClusterID != "":
		return fmt.Errorf("read changes of member %s: a change filter on a member needs a kind", f.ClusterID)
	}
	return nil
}

// KindList is the kinds the filter reads, nil for every kind.
func (f ChangeFilter) KindList() []Kind {
	if f.Kind != "" {
		return []Kind{f.Kind}
	}
	return f.Kinds
}

// ChangeFeed reads the registry's changes in resourceVersion order. Writers
// take their versions from commit tickets and commit in ticket order (they
// run side by side; only their commits are ordered), so a change feed never
// shows a version before all lower versions are visible.
type ChangeFeed interface {
	// Changes returns up to limit changes with ResourceVersion > after, in
	// order, and the registry resourceVersion they were read at (every
	// change up to it has been returned once the result is short of limit;
	// limit <= 0 returns only readAt, and after > readAt is not an error).
	// A DELETED change's object carries the deletion's resourceVersion.
	// It fails with ErrCompacted when after is below the retained history.
	// Only changes that filter matches are returned and counted against
	// limit.
	Changes(ctx context.Context, filter ChangeFilter, after int64, limit int) (changes []Change, readAt int64, err error)
	// Notifications delivers a value soon after each commit that changed
	// the registry (best effort, may coalesce; callers also poll). Each call
	// holds a database connection of its own: call it once per process and
	// fan out. The channel closes when ctx ends.
	Notifications(ctx context.Context) (<-chan struct{}, error)
	// Compact drops history older than the given time, keeping what is
	// needed to resume from any later resourceVersion; it returns the new
	// oldest resumable resourceVersion.
	Compact(ctx context.Context, olderThan time.Time) (int64, error)
}
