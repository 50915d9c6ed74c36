package store

import (
	"time"

	"k8s.io/apimachinery/pkg/labels"
)

// PlacementQuery asks how many replicas of one pod shape each member can
// take now. Amounts are in the registry's units: CPU in millicores,
// memory in bytes, every other resource in its own unit.
type PlacementQuery struct {
	// Clusters names the members to consider; Members selects them by
	// their ClusterCapacity labels instead; neither means every member.
	Clusters []string
	Members  labels.Requirements

	CPUMillis, MemoryBytes int64
	// Other holds every other resource requested, and Devices the DRA
	// devices per driver, all of them positive.
	Other   map[string]int64
	Devices map[string]int64

	// Nodes are the label and name requirements a node must meet: one
	// of the terms (every requirement of it), none meaning every node.
	Nodes []NodeTerm
	// Tolerations are the pod's; a cordoned node takes the replica only
	// if they tolerate the node.kubernetes.io/unschedulable:NoSchedule
	// taint, as kube-scheduler's NodeUnschedulable plugin decides.
	Tolerations []Toleration

	// SpreadKey is the topology spread constraint's node label, empty
	// without one; MaxSkew its skew.
	SpreadKey string
	MaxSkew   int64
}

// NodeTerm is one node selector term: label requirements and names
// (none: any name) a node must all meet.
type NodeTerm struct {
	Labels labels.Requirements
	// Names, when set, are the node names the term allows (In), or, with
	// NotNames, forbids.
	Names    []string
	NotNames []string
}

// Toleration is a pod's toleration, in the fields the taint filter reads.
type Toleration struct {
	Key      string `json:"key"`
	Operator string `json:"operator"`
	Value    string `json:"value"`
	Effect   string `json:"effect"`
}

// Tolerates says whether t tolerates taint, as corev1.Toleration.ToleratesTaint.
func (t Toleration) Tolerates(taint Taint) bool {
	if t.Effect != "" && t.Effect != taint.Effect {
		return false
	}
	if t.Key != "" && t.Key != taint.Key {
		return false
	}
	switch t.Operator {
	case "", "Equal":
		return t.Value == taint.Value
	case "Exists":
		return true
	}
	return false
}

// MemberFit is how many replicas fit on one member.
type MemberFit struct {
	ClusterID string
	// Fits replicas fit; Nodes nodes could take at least one.
	Fits, Nodes int64
	// Mirroring and MirroringSince are the member's mirroring state.
	Mirroring      MemberState
	MirroringSince time.Time
	// CompleteAsOf is the member's mirror heartbeat (ClusterCapacity's).
	CompleteAsOf time.Time
}
