package registry

import "time"

// DefaultMemberStaleAfter is --member-stale-after's default: three of the
// mirror heartbeat's minutes. A quiet member's heartbeat moves with the
// bookmarks its API server sends each watch once a minute, and its owner
// records it once a minute while it moves, so a healthy member's data age
// stays under about two minutes, and a third is margin for a slow commit.
const DefaultMemberStaleAfter = 3 * time.Minute

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
