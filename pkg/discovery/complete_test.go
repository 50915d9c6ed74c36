package discovery

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/clock"

	"github.com/example/platform-apiserver/pkg/registry/store"
)

// stallingStore fails every Apply while stalled, as a registry whose
// writes fail for good would.
type stallingStore struct {
	recordingStore
	stalled atomic.Bool
}

func (s *stallingStore) Apply(ctx context.Context, b store.Batch) error {
	if s.stalled.Load() {
		return errors.New("registry writes fail")
	}
	return s.recordingStore.Apply(ctx, b)
}

// TestSyncerCompleteAsOf: the mirror is complete as of a list's start once
// it commits, and as of each later event or bookmark once its batch and
// cursor commit (a bookmark at the committed cursor too, with nothing to
// commit); while commits fail it stays where the last commit left it.
func TestSyncerCompleteAsOf(t *testing.T) {
	m, st := newFakeMember(), &stallingStore{}
	before := time.Now()
	s := runSyncer(t, m, st, nil)
	w := nextWatcher(t, m)
	complete := func() time.Time { return s.status().completeAsOf }
	waitFor(t, "the list to make the mirror complete", func() bool { return !complete().Before(before) })
	listed := complete()

	time.Sleep(5 * time.Millisecond) // so the bookmark arrives later than the list began
	w.Action(watch.Bookmark, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "150"}})
	waitFor(t, "the bookmark's commit to move it", func() bool { return complete().After(listed) })
	bookmarked := complete()

	time.Sleep(5 * time.Millisecond)
	w.Action(watch.Bookmark, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "150"}})
	waitFor(t, "a bookmark at the committed cursor to move it", func() bool { return complete().After(bookmarked) })

	st.stalled.Store(true)
	stalledAt := complete()
	ns := namespace("x", "160")
	w.Add(&ns)
	waitFor(t, "the commit to keep failing", func() bool { return s.status().stuck })
	w.Action(watch.Bookmark, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "170"}})
	time.Sleep(100 * time.Millisecond)
	if got := complete(); !got.Equal(stalledAt) {
		t.Fatalf("complete as of %s while commits fail, want it to stay at %s", got, stalledAt)
	}

	st.stalled.Store(false)
	waitFor(t, "the retried commit to move it", func() bool { return complete().After(stalledAt) })
}

// TestWorkerCompleteAsOf: a member is complete as of the least of its
// resources, unknown while one has not said, and a resource the member
// does not serve holds nothing back.
func TestWorkerCompleteAsOf(t *testing.T) {
	t0 := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
	at := func(asOf time.Time, notServed bool) *syncer {
		s := newSyncer(syncerParams{Clock: clock.RealClock{}})
		s.completeAsOf, s.notServed = asOf, notServed
		return s
	}
	for _, tc := range []struct {
		name    string
		syncers []*syncer
		want    time.Time
	}{
		{"the least", []*syncer{at(t0.Add(time.Minute), false), at(t0, false), at(t0.Add(2*time.Minute), false)}, t0},
		{"one has not said", []*syncer{at(t0, false), at(time.Time{}, false)}, time.Time{}},
		{"not served", []*syncer{at(t0.Add(time.Minute), false), at(time.Time{}, true)}, t0.Add(time.Minute)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := &worker{syncers: tc.syncers}
			if got := w.completeAsOf(); !got.Equal(tc.want) {
				t.Errorf("complete as of %s, want %s", got, tc.want)
			}
		})
	}
}
