package registry

import (
	"context"
	"slices"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/example/platform-apiserver/pkg/apis/platform"
	"github.com/example/platform-apiserver/pkg/registry/store"
)

// DefaultMemberStaleAfter is --member-stale-after's default. A quiet
// member's heartbeat moves with the bookmarks its API server sends each
// watch once a minute, and its owner records it once a minute while it
// moves, so a healthy member's data age is about two minutes at worst: in
// the fleet benchmark (200 members, docs/benchmarks.md) p99 122 s, max
// 183 s. Five minutes leaves that tail room, as a node's grace period
// (40-50 s) leaves a kubelet's 10 s heartbeats.
const DefaultMemberStaleAfter = 5 * time.Minute

// MinMemberStaleAfter is the least --member-stale-after accepted (other
// than 0): a healthy member's data age reaches about two minutes.
const MinMemberStaleAfter = 2 * time.Minute

// MemberStaleness judges a member's data by its mirror heartbeat's age when it is
// read, as node Lease consumers judge a kubelet: whatever the member's
// writer last recorded, data that nothing vouched for within StaleAfter is
// stale, including when that writer cannot write.
type MemberStaleness struct {
	// StaleAfter is --member-stale-after; zero never judges data stale.
	StaleAfter time.Duration
	// Now is the reader's clock (time.Now when nil).
	Now func() time.Time
}

// Age is how old data complete as of completeAsOf is now, to the second,
// and whether that is past StaleAfter. Zero completeAsOf (no heartbeat
// yet) is neither aged nor stale: the member's state says why.
func (f MemberStaleness) Age(completeAsOf time.Time) (time.Duration, bool) {
	if completeAsOf.IsZero() {
		return 0, false
	}
	age := f.Since(completeAsOf)
	return age, f.StaleAfter > 0 && age > f.StaleAfter
}

// Since is the time from t to now, to the second, never negative.
func (f MemberStaleness) Since(t time.Time) time.Duration {
	now := time.Now
	if f.Now != nil {
		now = f.Now
	}
	return max(now().Sub(t), 0).Truncate(time.Second)
}

// Freshness is how current a member's data is, as a report answers for it.
type Freshness struct {
	// Mirroring is the member's recorded state, Stale when judged stale.
	Mirroring platform.MirroringState
	// Stale is true unless the member is Synced and its heartbeat within
	// the bound: the answer is from what the registry last saw of it.
	Stale bool
	// DataAge is its heartbeat's age; without a heartbeat, for a member
	// out of Synced, how long since it left.
	DataAge *metav1.Duration
}

// Judge is the freshness of a member in state since since whose heartbeat
// is completeAsOf.
func (f MemberStaleness) Judge(state store.MemberState, since, completeAsOf time.Time) Freshness {
	out := Freshness{Mirroring: platform.MirroringState(state), Stale: state != store.MemberSynced}
	age, stale := f.Age(completeAsOf)
	switch {
	case !completeAsOf.IsZero():
		out.DataAge = &metav1.Duration{Duration: age}
	case out.Stale && !since.IsZero():
		out.DataAge = &metav1.Duration{Duration: f.Since(since)}
	}
	if stale {
		out.Stale, out.Mirroring = true, platform.MirroringStale
	}
	return out
}

// heartbeatsTTL is how long MemberHeartbeats serves what it read.
const heartbeatsTTL = 10 * time.Second

// MemberHeartbeats holds every member's mirror heartbeat for the tables of
// the kinds that show a member's data age beside its objects
// (DataAgeColumn), read at most once per heartbeatsTTL.
type MemberHeartbeats struct {
	// Load reads every member's heartbeat (ClusterCapacity completeAsOf).
	Load      func(ctx context.Context) (map[string]time.Time, error)
	Staleness MemberStaleness

	mu     sync.Mutex
	readAt time.Time
	beats  map[string]time.Time
}

// staleAge is the member's data age if it is past the bound, else 0: also
// when its heartbeat cannot be read, which the member's ClusterCapacity
// says.
func (h *MemberHeartbeats) staleAge(cluster string) time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	if time.Since(h.readAt) > heartbeatsTTL {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		beats, err := h.Load(ctx)
		cancel()
		if err == nil {
			h.beats = beats
		}
		h.readAt = time.Now() // a failed read is not retried at every row
	}
	age, stale := h.Staleness.Age(h.beats[cluster])
	if !stale {
		return 0
	}
	return age
}

// WithDataAge returns a copy of k whose table ends with DataAgeColumn, or k
// itself without heartbeats.
func WithDataAge[R, O any](k *Kind[R, O], h *MemberHeartbeats, cluster func(*O) string) *Kind[R, O] {
	if h == nil {
		return k
	}
	c := *k
	c.Columns = append(slices.Clip(k.Columns), DataAgeColumn(h, cluster))
	return &c
}

// DataAgeColumn is a -o wide column that shows the data age of the member
// of each object (cluster names it) where it is past --member-stale-after.
func DataAgeColumn[O any](h *MemberHeartbeats, cluster func(*O) string) Column[O] {
	return Column[O]{Name: "Member Data Age", Type: "string", Priority: 1,
		Description: "How old the mirror of the object's member is, where that is past the server's --member-stale-after (its ClusterCapacity shows Stale)",
		Cell: func(o *O) any {
			if age := h.staleAge(cluster(o)); age > 0 {
				return age.String()
			}
			return None
		}}
}
