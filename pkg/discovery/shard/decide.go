package shard

import (
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
)

// round is what one round of a Manager decides from: the Leases as listed
// and observed, and this replica's own state. decide is a pure function
// of it.
type round struct {
	self string // this replica's identity
	set  string // the lease set's name (Config.Name)
	now  time.Time
	// leaseDuration is this manager's (Config.LeaseDuration).
	leaseDuration time.Duration
	// mayTakeOver: this replica's own writes have worked for a lease
	// duration (Manager.mayTakeOver).
	mayTakeOver bool
	members     []string                         // configured
	leases      map[string]*coordinationv1.Lease // listed, by name
	observed    map[string]observation           // by Lease name
	held        map[string]bool                  // members whose Lease this replica holds
	lost        map[string]bool                  // held members whose mirroring stopped on its own
	// presences are the listed presence Leases by their replica's
	// identity (set by decide).
	presences map[string]*coordinationv1.Lease
}

// verb is what a step does.
type verb string

const (
	// giveUp: stop the member and release its Lease (it was lost, is no
	// longer configured, or is handed over to the assignee).
	giveUp verb = "give up"
	// stop: another replica holds the Lease; stop mirroring.
	stop verb = "stop"
	// renew the held Lease (if a third of its duration passed).
	renew verb = "renew"
	// create the member's Lease, held by this replica, and mirror it.
	create verb = "create"
	// acquire the listed Lease (free, expired, or ours) and mirror it.
	acquire verb = "acquire"
	// collect deletes a stale Lease.
	collect verb = "collect"
)

// step is one thing a round does.
type step struct {
	verb verb
	// id is the member (for collect: the Lease's name).
	id string
	// lease is the listed Lease the step acts on, when listed.
	lease *coordinationv1.Lease
	// reason says why a member is given up; assignee names who a
	// handed-over member goes to.
	reason   reason
	assignee string
}

// reason is why a member is given up.
type reason string

const (
	reasonLost         reason = "lost"         // its mirroring stopped on its own
	reasonHandedOver   reason = "handed over"  // assigned to another replica
	reasonUnconfigured reason = "unconfigured" // no longer a member
)

// decide returns a round's steps, in the order they are to be taken:
// lost members given up, each configured member's step, members no longer
// configured given up, stale Leases collected. Renewals are taken together
// after the others.
func decide(r round) []step {
	r.presences = map[string]*coordinationv1.Lease{}
	for _, l := range r.leases {
		if l.Labels[LabelRole] == RoleReplica && l.Spec.HolderIdentity != nil {
			r.presences[*l.Spec.HolderIdentity] = l
		}
	}
	var steps []step
	held := make(map[string]bool, len(r.held))
	for id := range r.held {
		if r.lost[id] {
			steps = append(steps, step{verb: giveUp, id: id, reason: reasonLost})
		} else {
			held[id] = true
		}
	}
	replicas := r.liveReplicas()
	alive := make(map[string]bool, len(replicas))
	for _, id := range replicas {
		alive[id] = true
	}
	configured := make(map[string]bool, len(r.members))
	for _, id := range r.members {
		configured[id] = true
	}
	assigned := Assign(r.members, replicas, r.holders(held, alive))
	for _, id := range r.members {
		if r.lost[id] {
			continue // released this round; the next decides afresh
		}
		if s, ok := r.memberStep(id, held[id], assigned[id]); ok {
			steps = append(steps, s)
		}
	}
	for id := range held {
		if !configured[id] {
			steps = append(steps, step{verb: giveUp, id: id, reason: reasonUnconfigured})
		}
	}
	for _, l := range r.leases {
		if r.stale(l, configured) {
			steps = append(steps, step{verb: collect, id: l.Name, lease: l})
		}
	}
	return steps
}

// memberStep is the step for one configured member, if any.
func (r round) memberStep(id string, held bool, assignee string) (step, bool) {
	l := r.leases[MemberLeaseName(r.set, id)]
	mine := assignee == r.self
	switch {
	case held && l != nil && holder(l) != r.self:
		return step{verb: stop, id: id, lease: l}, true
	case held && !mine:
		return step{verb: giveUp, id: id, reason: reasonHandedOver, assignee: assignee}, true
	case held:
		return step{verb: renew, id: id, lease: l}, true
	case l == nil && mine:
		return step{verb: create, id: id}, true
	case l != nil && holder(l) == r.self:
		// Ours from before (a renewal whose answer was lost): take it back.
		return step{verb: acquire, id: id, lease: l}, true
	case l != nil && (mine || r.expiredLong(l)) && (holder(l) == "" || r.expired(l) && r.mayTakeOver):
		// Free or expired: ours by assignment, or, long expired, anyone's
		// (replicas that disagree on the assignment never leave a member
		// unmirrored).
		return step{verb: acquire, id: id, lease: l}, true
	}
	return step{}, false
}

// liveReplicas are this replica and those whose presence Lease is alive.
func (r round) liveReplicas() []string {
	replicas := []string{r.self}
	for id, l := range r.presences {
		if !r.expired(l) {
			replicas = append(replicas, id)
		}
	}
	return replicas
}

// holders says who holds each member, as Assign takes it: this replica
// what it holds, a live replica what its Lease says, unless that Lease has
// been left unrenewed for long (its holder is alive but stuck on it).
func (r round) holders(held, alive map[string]bool) map[string]string {
	out := make(map[string]string, len(r.members))
	for _, id := range r.members {
		l := r.leases[MemberLeaseName(r.set, id)]
		switch {
		case held[id] && (l == nil || holder(l) == r.self):
			out[id] = r.self
		case l != nil && alive[holder(l)] && !r.expiredLong(l):
			out[id] = holder(l)
		}
	}
	return out
}

// unchanged is how long the Lease has not changed, as observed here.
func (r round) unchanged(l *coordinationv1.Lease) time.Duration {
	return r.now.Sub(r.observed[l.Name].at)
}

// expired: the Lease no longer holds: it has not changed for its
// duration, or it is a member's whose holder is gone.
func (r round) expired(l *coordinationv1.Lease) bool {
	return r.lapsed(l, false) || r.holderGone(l, false)
}

// expiredLong: unchanged for two of the larger of its and this manager's
// lease durations (a released Lease says 1s; its assignee must get the time
// to take it), or a member's whose holder has been gone that long.
func (r round) expiredLong(l *coordinationv1.Lease) bool {
	return r.lapsed(l, true) || r.holderGone(l, true)
}

// lapsed: the Lease has not changed for its duration (long: for two of the
// larger of its and this manager's durations).
func (r round) lapsed(l *coordinationv1.Lease, long bool) bool {
	d := leaseDuration(l, r.leaseDuration)
	if long {
		d = 2 * max(d, r.leaseDuration)
	}
	return r.unchanged(l) > d
}

// holderGone: l is a member Lease held by another replica whose presence
// Lease has lapsed (see lapsed), or who has none left and l has not changed
// for this manager's lease duration (two when long). A replica keeps the
// members it holds alive through its presence Lease, one write a round
// however many it holds, and writes a member's own Lease only rarely
// (Config.MemberLeaseDuration): renewing every member's Lease every 6 s
// was 33 writes a second for 200 members, and when the hosting cluster
// slowed down, missed renewals moved members and the moves added load
// (issue 25's 200-member run: 1,978 claims for 200 members).
func (r round) holderGone(l *coordinationv1.Lease, long bool) bool {
	h := holder(l)
	if l.Labels[LabelRole] != RoleMember || h == "" || h == r.self {
		return false
	}
	if p := r.presences[h]; p != nil {
		return r.lapsed(p, long)
	}
	d := r.leaseDuration
	if long {
		d *= 2
	}
	return r.unchanged(l) > d
}

// stale: a Lease of a member nobody configures or of a replica that is
// gone, expired for ten durations.
func (r round) stale(l *coordinationv1.Lease, configured map[string]bool) bool {
	if r.unchanged(l) <= 10*leaseDuration(l, r.leaseDuration) {
		return false
	}
	return l.Labels[LabelRole] != RoleMember || !configured[l.Labels[LabelCluster]]
}
