package discovery

import (
	"context"
	"slices"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/clock"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/example/platform-apiserver/pkg/registry/store"
)

// TestReportStates: the worker records its state at once, again on each
// change, and not while it holds.
func TestReportStates(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Now())
	rec := &recordingStore{}
	a, b := newSyncer(syncerParams{Clock: clock.RealClock{}}), newSyncer(syncerParams{Clock: clock.RealClock{}})
	w := &worker{clusterID: "c", syncers: []*syncer{a, b}, cfg: &Config{Clock: clk, Sync: SyncConfig{ApplyTimeout: time.Minute}}}
	w.store = newMemberStore(rec, "c", func(error) {})
	stop := w.startReporting(t.Context())
	defer stop()

	states := func() []store.MemberState {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		return slices.Clone(rec.states)
	}
	// tick lets a report interval pass once the reporter waits for it.
	tick := func() {
		t.Helper()
		if err := wait.PollUntilContextTimeout(t.Context(), time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
			return clk.HasWaiters(), nil
		}); err != nil {
			t.Fatal("the reporter does not wait for its interval")
		}
		clk.Step(stateReportInterval)
	}
	expect := func(want ...store.MemberState) {
		t.Helper()
		if err := wait.PollUntilContextTimeout(t.Context(), time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
			return slices.Equal(states(), want), nil
		}); err != nil {
			t.Fatalf("recorded %v, want %v", states(), want)
		}
	}
	set := func(s *syncer, f func(s *syncer)) {
		s.mu.Lock()
		defer s.mu.Unlock()
		f(s)
	}

	expect(store.MemberSyncing)
	tick()
	tick()
	expect(store.MemberSyncing)
	set(a, func(s *syncer) { s.synced = true })
	set(b, func(s *syncer) { s.synced = true })
	tick()
	expect(store.MemberSyncing, store.MemberSynced)
	set(b, func(s *syncer) { s.unreachable = true })
	tick()
	expect(store.MemberSyncing, store.MemberSynced, store.MemberUnreachable)
	set(b, func(s *syncer) { s.unreachable, s.stuck = false, true })
	tick()
	expect(store.MemberSyncing, store.MemberSynced, store.MemberUnreachable, store.MemberLagging)
}

// TestReportLastChangeAndUsage: the time of the last committed change, and
// the usage heartbeat (the newest node metrics sample recorded), are each
// reported when a minute past the one reported, not at every change.
func TestReportLastChangeAndUsage(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  func(w *worker, at time.Time)
		get  func(store.MemberStatus) time.Time
	}{
		{"last change", func(w *worker, at time.Time) {
			a := w.syncers[0]
			a.mu.Lock()
			a.lastChange = at
			a.mu.Unlock()
		}, func(st store.MemberStatus) time.Time { return st.LastChange }},
		{"usage heartbeat", func(w *worker, at time.Time) { w.scraper.newest.Store(at.UnixNano()) },
			func(st store.MemberStatus) time.Time { return st.LastUsage }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := testingclock.NewFakeClock(time.Now())
			rec := &recordingStore{}
			a := newSyncer(syncerParams{Clock: clock.RealClock{}})
			a.synced = true
			w := &worker{clusterID: "c", syncers: []*syncer{a}, scraper: newScraper(scraperParams{}),
				cfg: &Config{Clock: clk, Sync: SyncConfig{ApplyTimeout: time.Minute}}}
			w.store = newMemberStore(rec, "c", func(error) {})
			reports := func() []store.MemberStatus {
				rec.mu.Lock()
				defer rec.mu.Unlock()
				return slices.Clone(rec.statuses)
			}
			step := func(at time.Time, want int) {
				t.Helper()
				tc.set(w, at)
				if err := wait.PollUntilContextTimeout(t.Context(), time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
					return clk.HasWaiters(), nil
				}); err != nil {
					t.Fatal("the reporter does not wait for its interval")
				}
				clk.Step(stateReportInterval)
				if err := wait.PollUntilContextTimeout(t.Context(), time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
					return len(reports()) == want && clk.HasWaiters(), nil
				}); err != nil {
					t.Fatalf("after a change at %s: %d reports %+v, want %d", at, len(reports()), reports(), want)
				}
			}
			stop := w.startReporting(t.Context())
			defer stop()
			if err := wait.PollUntilContextTimeout(t.Context(), time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
				return len(reports()) == 1, nil
			}); err != nil {
				t.Fatalf("first report: %+v", reports())
			}
			t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
			step(t0, 2)                     // the first one
			step(t0.Add(30*time.Second), 2) // within a minute of the reported one: not reported
			step(t0.Add(61*time.Second), 3) // a minute later: reported
			if got := reports(); !tc.get(got[1]).Equal(t0) || !tc.get(got[2]).Equal(t0.Add(61*time.Second)) {
				t.Errorf("reports %+v; want %s at %s and %s", got, tc.name, t0, t0.Add(61*time.Second))
			}
		})
	}
}

// TestReportTimesTogether: a report that one time makes due carries the
// other as it is, so a busy, scraped member's two times share one report
// a minute instead of taking one each.
func TestReportTimesTogether(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Now())
	rec := &recordingStore{}
	a := newSyncer(syncerParams{Clock: clock.RealClock{}})
	a.synced = true
	w := &worker{clusterID: "c", syncers: []*syncer{a}, scraper: newScraper(scraperParams{}),
		cfg: &Config{Clock: clk, Sync: SyncConfig{ApplyTimeout: time.Minute}}}
	w.store = newMemberStore(rec, "c", func(error) {})
	reports := func() []store.MemberStatus {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		return slices.Clone(rec.statuses)
	}
	step := func(change, usage time.Time, want int) {
		t.Helper()
		a.mu.Lock()
		a.lastChange = change
		a.mu.Unlock()
		w.scraper.newest.Store(usage.UnixNano())
		if err := wait.PollUntilContextTimeout(t.Context(), time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
			return clk.HasWaiters(), nil
		}); err != nil {
			t.Fatal("the reporter does not wait for its interval")
		}
		clk.Step(stateReportInterval)
		if err := wait.PollUntilContextTimeout(t.Context(), time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
			return len(reports()) == want && clk.HasWaiters(), nil
		}); err != nil {
			t.Fatalf("after a change at %s and usage at %s: %d reports %+v, want %d", change, usage, len(reports()), reports(), want)
		}
	}
	stop := w.startReporting(t.Context())
	defer stop()
	if err := wait.PollUntilContextTimeout(t.Context(), time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		return len(reports()) == 1, nil
	}); err != nil {
		t.Fatalf("first report: %+v", reports())
	}
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	step(t0, t0, 2)
	step(t0.Add(61*time.Second), t0.Add(45*time.Second), 3)  // the change is due; the usage rides along
	step(t0.Add(90*time.Second), t0.Add(100*time.Second), 3) // neither is a minute past its report
	step(t0.Add(122*time.Second), t0.Add(122*time.Second), 4)
	got := reports()
	if last := got[2]; !last.LastChange.Equal(t0.Add(61*time.Second)) || !last.LastUsage.Equal(t0.Add(45*time.Second)) {
		t.Errorf("the change's report %+v; want the usage of %s with it", last, t0.Add(45*time.Second))
	}
	if last := got[3]; !last.LastChange.Equal(t0.Add(122*time.Second)) || !last.LastUsage.Equal(t0.Add(122*time.Second)) {
		t.Errorf("the next minute's report %+v; want both times of %s", last, t0.Add(122*time.Second))
	}
}
