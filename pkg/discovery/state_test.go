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

// reporter is a synced worker of one syncer and a scraper whose state
// reporter runs on a fake clock, recording into a recordingStore.
type reporter struct {
	t   *testing.T
	w   *worker
	clk *testingclock.FakeClock
	rec *recordingStore
}

// startReporter starts the reporter and waits for its first report.
func startReporter(t *testing.T) *reporter {
	clk := testingclock.NewFakeClock(time.Now())
	a := newSyncer(syncerParams{Clock: clock.RealClock{}})
	a.synced = true
	r := &reporter{t: t, clk: clk, rec: &recordingStore{}, w: &worker{clusterID: "c", syncers: []*syncer{a},
		scraper: newScraper(scraperParams{}), cfg: &Config{Clock: clk, Sync: SyncConfig{ApplyTimeout: time.Minute}}}}
	r.w.store = newMemberStore(r.rec, "c", func(error) {})
	t.Cleanup(r.w.startReporting(t.Context()))
	if err := wait.PollUntilContextTimeout(t.Context(), time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		return len(r.reports()) == 1, nil
	}); err != nil {
		t.Fatalf("first report: %+v", r.reports())
	}
	return r
}

func (r *reporter) reports() []store.MemberStatus {
	r.rec.mu.Lock()
	defer r.rec.mu.Unlock()
	return slices.Clone(r.rec.statuses)
}

func (r *reporter) setLastChange(at time.Time) {
	a := r.w.syncers[0]
	a.mu.Lock()
	a.lastChange = at
	a.mu.Unlock()
}

func (r *reporter) setCompleteAsOf(at time.Time) {
	a := r.w.syncers[0]
	a.mu.Lock()
	a.completeAsOf = at
	a.mu.Unlock()
}

func (r *reporter) setLastUsage(at time.Time) { r.w.scraper.newest.Store(at.UnixNano()) }

// step lets a report interval pass once the reporter waits for it, and
// waits until it has made want reports in all and waits again.
func (r *reporter) step(want int) {
	r.t.Helper()
	ctx := r.t.Context()
	if err := wait.PollUntilContextTimeout(ctx, time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		return r.clk.HasWaiters(), nil
	}); err != nil {
		r.t.Fatal("the reporter does not wait for its interval")
	}
	r.clk.Step(stateReportInterval)
	if err := wait.PollUntilContextTimeout(ctx, time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		return len(r.reports()) == want && r.clk.HasWaiters(), nil
	}); err != nil {
		r.t.Fatalf("%d reports %+v, want %d", len(r.reports()), r.reports(), want)
	}
}

// TestReportLastChangeAndUsage: the time of the last committed change, and
// the usage heartbeat (the newest node metrics sample recorded), are each
// reported when a minute past the one reported, not at every change.
func TestReportLastChangeAndUsage(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  func(r *reporter, at time.Time)
		get  func(store.MemberStatus) time.Time
	}{
		{"last change", (*reporter).setLastChange, func(st store.MemberStatus) time.Time { return st.LastChange }},
		{"usage heartbeat", (*reporter).setLastUsage, func(st store.MemberStatus) time.Time { return st.LastUsage }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := startReporter(t)
			step := func(at time.Time, want int) {
				t.Helper()
				tc.set(r, at)
				r.step(want)
			}
			t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
			r.clk.Step(timesInterval)
			step(t0, 2) // the first one
			r.clk.Step(timesInterval)
			step(t0.Add(30*time.Second), 2) // within a minute of the reported one: not reported
			step(t0.Add(61*time.Second), 3) // a minute later: reported
			if got := r.reports(); !tc.get(got[1]).Equal(t0) || !tc.get(got[2]).Equal(t0.Add(61*time.Second)) {
				t.Errorf("reports %+v; want %s at %s and %s", got, tc.name, t0, t0.Add(61*time.Second))
			}
		})
	}
}

// TestReportMirrorHeartbeat: the mirror's heartbeat (how far every change
// is committed) is reported when it moved and a minute has passed since
// the last report, however little it moved: a
// quiet member's bookmarks come about a minute apart, and one a little
// early must not wait for the next.
func TestReportMirrorHeartbeat(t *testing.T) {
	r := startReporter(t)
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	r.setCompleteAsOf(t0)
	r.step(1) // the first report (of the state) is a second old
	r.clk.Step(timesInterval)
	r.step(2)
	r.setCompleteAsOf(t0.Add(59 * time.Second))
	r.clk.Step(50 * time.Second)
	r.step(2) // moved, but the last report is 51 s old
	r.clk.Step(10 * time.Second)
	r.step(3)
	r.clk.Step(timesInterval)
	r.step(3) // not moved since
	got := r.reports()
	if !got[1].CompleteAsOf.Equal(t0) || !got[2].CompleteAsOf.Equal(t0.Add(59*time.Second)) {
		t.Errorf("reports %+v; want the mirror heartbeat at %s and %s", got, t0, t0.Add(59*time.Second))
	}
}

// TestReportTimesTogether: a report that one time makes due carries the
// other as it is, so a busy, scraped member's two times share one report
// a minute instead of taking one each.
func TestReportTimesTogether(t *testing.T) {
	r := startReporter(t)
	step := func(change, usage time.Time, want int) {
		t.Helper()
		r.setLastChange(change)
		r.setLastUsage(usage)
		r.step(want)
	}
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	r.clk.Step(timesInterval)
	step(t0, t0, 2)
	r.clk.Step(timesInterval)
	step(t0.Add(61*time.Second), t0.Add(45*time.Second), 3) // the change is due; the usage rides along
	r.clk.Step(timesInterval)
	step(t0.Add(90*time.Second), t0.Add(100*time.Second), 3) // neither is a minute past its report
	step(t0.Add(122*time.Second), t0.Add(122*time.Second), 4)
	got := r.reports()
	if last := got[2]; !last.LastChange.Equal(t0.Add(61*time.Second)) || !last.LastUsage.Equal(t0.Add(45*time.Second)) {
		t.Errorf("the change's report %+v; want the usage of %s with it", last, t0.Add(45*time.Second))
	}
	if last := got[3]; !last.LastChange.Equal(t0.Add(122*time.Second)) || !last.LastUsage.Equal(t0.Add(122*time.Second)) {
		t.Errorf("the next minute's report %+v; want both times of %s", last, t0.Add(122*time.Second))
	}
}
