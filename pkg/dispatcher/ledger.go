package dispatcher

import (
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Ledger holds the room the dispatcher promised but the registry may not
// show yet: a Workload nominated to a member takes its demand there from
// the nomination until its pods can be in the mirror. That is until the
// worker admitted it and Settle has passed (the remote Job's pods are
// created, bound and mirrored within it) with the member's mirror current
// meanwhile; or Expiry after the nomination, whatever happened (a worker
// that never admitted it, a mirror stale all along). Without it a burst
// of Workloads all see the same free room and all go to the same member.
type Ledger struct {
	// Settle is how long an admitted Workload's demand is still held.
	Settle time.Duration
	// Expiry is the longest any demand is held.
	Expiry time.Duration

	mu       sync.Mutex
	promises map[types.UID]*promise
}

type promise struct {
	member     string
	demand     corev1.ResourceList
	nominated  time.Time
	admittedAt time.Time
}

// Promise records that the Workload uid was nominated to member with
// demand at now, replacing an earlier promise of it.
func (l *Ledger) Promise(uid types.UID, member string, demand corev1.ResourceList, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.promises == nil {
		l.promises = map[types.UID]*promise{}
	}
	l.promises[uid] = &promise{member: member, demand: demand, nominated: now}
}

// Admitted records that a worker admitted the Workload at now (the first
// call counts).
func (l *Ledger) Admitted(uid types.UID, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if p, ok := l.promises[uid]; ok && p.admittedAt.IsZero() {
		p.admittedAt = now
	}
}

// Release forgets the Workload's promise (finished, deleted, evicted).
func (l *Ledger) Release(uid types.UID) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.promises, uid)
}

// InFlight sums the demand promised to member and still held at now,
// leaving out the Workload except (being nominated again). staleSince is
// when the member's mirror stopped being current (stale, relisting), zero
// while it is current: what its workers admitted less than Settle before
// then is held past Settle, as the mirror may not have their pods.
// Promises past Expiry are dropped.
func (l *Ledger) InFlight(member string, except types.UID, now, staleSince time.Time) corev1.ResourceList {
	l.mu.Lock()
	defer l.mu.Unlock()
	sum := corev1.ResourceList{}
	for uid, p := range l.promises {
		if now.Sub(p.nominated) >= l.Expiry {
			delete(l.promises, uid)
			continue
		}
		if p.member != member || uid == except || !l.held(p, now, staleSince) {
			continue
		}
		for r, q := range p.demand {
			total := sum[r]
			total.Add(q)
			sum[r] = total
		}
	}
	return sum
}

// Len is how many promises are held at now, their members' mirrors
// current.
func (l *Ledger) Len(now time.Time) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, p := range l.promises {
		if now.Sub(p.nominated) < l.Expiry && l.held(p, now, time.Time{}) {
			n++
		}
	}
	return n
}

// held says a promise not expired still counts: not admitted yet, admitted
// less than Settle ago, or too late for the mirror to have seen its pods
// before it went stale.
func (l *Ledger) held(p *promise, now, staleSince time.Time) bool {
	if p.admittedAt.IsZero() || now.Sub(p.admittedAt) < l.Settle {
		return true
	}
	return !staleSince.IsZero() && p.admittedAt.Add(l.Settle).After(staleSince)
}
