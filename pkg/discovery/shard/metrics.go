package shard

import (
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/component-base/metrics"
)

// LeaseWrites counts the manager's writes of Leases, for the discovery
// metrics to register: what sharing costs the hosting cluster.
var LeaseWrites = metrics.NewCounterVec(&metrics.CounterOpts{
	Subsystem: "platform_discovery",
	Name:      "lease_writes_total",
	Help: "Writes (create, update, delete) of discovery Leases in the hosting cluster by this replica, by lease (presence: " +
		"its own, every retry period; member: taking, renewing and releasing members) and result (ok, conflict, error).",
	StabilityLevel: metrics.ALPHA,
}, []string{"lease", "result"})

// countWrite records one Lease write of role (RoleMember or RoleReplica)
// that ended with err.
func countWrite(role string, err error) {
	lease, result := "member", "ok"
	if role == RoleReplica {
		lease = "presence"
	}
	switch {
	case apierrors.IsConflict(err):
		result = "conflict"
	case err != nil:
		result = "error"
	}
	LeaseWrites.WithLabelValues(lease, result).Inc()
}
