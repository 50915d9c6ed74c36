package bench

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	registrypostgres "github.com/example/platform-apiserver/pkg/registry/postgres"
)

const (
	// primaryHang: past the feed's read timeout (10 s) and failed readiness,
	// short of the request timeout (60 s).
	primaryHang = 20 * time.Second
	// replicaHang: at least twice discovery's lease duration (15 s).
	replicaHang = 30 * time.Second
)

// BenchmarkFaultRecovery measures, for each fault of docs/faults.md made
// here, the time from the fault's end (for a lost replica, the fault) until
// a change made after it reaches a watch opened before it: one run per
// iteration, p50 and max reported. See docs/benchmarks.md, "Time to fresh".
func BenchmarkFaultRecovery(b *testing.B) {
	e := benchEnv(b, envOptions{name: "faults"})
	b.Run("fault=primary-hung-then-back", func(b *testing.B) { benchPrimaryHungThenBack(b, e) })
	for _, f := range []primaryFault{
		{name: "hung-standby-promoted", replica: "hung-promoted", perRun: true, freshWriter: true, make: promoteAfter(hang)},
		{name: "hung-standby-promoted-lost-commits", replica: "hung-promoted-lost-commits", perRun: true, freshWriter: true, make: promoteAfter(hangLosingCommits)},
		{name: "killed-restarted", replica: "primary-killed", make: killAndRestart, endMetric: "s-to-restart"},
		// A failover without lost commits: a fast shutdown sends every
		// commit to the standby before the primary exits.
		{name: "stopped-standby-promoted", replica: "stopped-promoted", perRun: true, make: promoteAfter(stop)},
	} {
		b.Run("fault=primary-"+f.name, func(b *testing.B) { benchPrimaryFault(b, e, f) })
	}
	b.Run("fault=replica-hung-past-lease", func(b *testing.B) { benchReplicaHung(b, e) })
	b.Run("fault=replica-killed", func(b *testing.B) { benchReplicaKilled(b, e) })
}

// benchPrimaryHungThenBack: the primary SIGSTOPped for primaryHang, a change
// committed during the hang, SIGCONT, another change; s-to-fresh is from
// SIGCONT until both reached the watch.
func benchPrimaryHungThenBack(b *testing.B, e *env) {
	ctx := b.Context()
	r := startFaultRegistry(b, e, "platform-apiserver-primary-hung")
	rec := recovery{}
	for run := 1; b.Loop(); run++ {
		must(b, r.beforeFault(ctx))
		mark := r.watch.mark()
		must(b, r.primary.Freeze())
		during := r.next()
		duringErr := make(chan error, 1)
		go func() {
			_, err := r.commit(ctx, r.writer, during)
			duringErr <- err
		}()
		must(b, sleepCtx(ctx, primaryHang))
		must(b, r.primary.Thaw())
		back := time.Now()
		after := r.next()
		committed, err := r.commit(ctx, r.writer, after)
		must(b, err)
		must(b, <-duringErr)
		seenDuring, err := r.watch.await(ctx, during, freshTimeout)
		must(b, err)
		seenAfter, err := r.watch.await(ctx, after, freshTimeout)
		must(b, err)
		rec.add("s-to-fresh", later(seenDuring, seenAfter).Sub(back))
		rec.add("s-to-commit", committed.Sub(back))
		b.Logf("run %d: after SIGCONT: the change made during the hang watched at %s, the one made after at %s (committed at %s); watch streams ended: %q",
			run, seconds(seenDuring.Sub(back)), seconds(seenAfter.Sub(back)), seconds(committed.Sub(back)), r.watch.endingsSince(mark))
	}
	rec.report(b)
}

// primaryFault is a fault of the primary that make ends: s-to-fresh is from
// its end until a change committed after it reached the watch; endMetric
// (else s-to-commit, from its end to the commit) from its start to its end.
type primaryFault struct {
	name, replica string
	perRun        bool // a registry of its own each run
	// freshWriter: the change is written by a store opened after the fault,
	// as discovery's next commit is on a new connection.
	freshWriter bool
	make        func(context.Context, *faultRegistry) error
	endMetric   string
}

func benchPrimaryFault(b *testing.B, e *env, f primaryFault) {
	ctx := b.Context()
	rec := recovery{}
	var shared *faultRegistry
	if !f.perRun {
		shared = startFaultRegistry(b, e, "platform-apiserver-"+f.replica)
	}
	for run := 1; b.Loop(); run++ {
		func() {
			r := shared
			if r == nil {
				r = startFaultRegistry(b, e, fmt.Sprintf("platform-apiserver-%s-%d", f.replica, run))
				defer stopFaultRegistry(b, r)
			}
			must(b, r.beforeFault(ctx))
			mark := r.watch.mark()
			began := time.Now()
			must(b, f.make(ctx, r))
			ended := time.Now()
			w := r.writer
			if f.freshWriter {
				var err error
				if w, err = registrypostgres.Open(ctx, r.dsn, registrypostgres.Options{}); err != nil {
					b.Fatal(err)
				}
				defer w.Close()
			}
			committed, seen, err := r.commitAndAwait(ctx, w)
			must(b, err)
			rec.add("s-to-fresh", seen.Sub(ended))
			if f.endMetric != "" {
				rec.add(f.endMetric, ended.Sub(began))
			} else {
				rec.add("s-to-commit", committed.Sub(ended))
			}
			b.Logf("run %d: the fault ended %s after it began; after that: committed at %s, watched at %s; watch streams ended: %q",
				run, seconds(ended.Sub(began)), seconds(committed.Sub(ended)), seconds(seen.Sub(ended)), r.watch.endingsSince(mark))
		}()
	}
	rec.report(b)
}

func promoteAfter(fault func(context.Context, *faultRegistry) error) func(context.Context, *faultRegistry) error {
	return func(ctx context.Context, r *faultRegistry) error {
		if err := fault(ctx, r); err != nil {
			return err
		}
		return r.standby.Promote(ctx)
	}
}

func hang(_ context.Context, r *faultRegistry) error { return r.primary.Freeze() }

func stop(_ context.Context, r *faultRegistry) error { return r.primary.Pause() } // fast shutdown

// hangLosingCommits hangs the primary after a last change the standby
// missed (stopped, then started again): the promotion loses it.
func hangLosingCommits(ctx context.Context, r *faultRegistry) error {
	if err := r.standby.Pause(); err != nil {
		return err
	}
	if _, _, err := r.commitAndAwait(ctx, r.writer); err != nil {
		return err
	}
	if err := r.primary.Freeze(); err != nil {
		return err
	}
	return r.standby.Resume(ctx)
}

// killAndRestart SIGKILLs the primary and starts it again on its data (crash
// recovery); it ends when the server accepts connections.
func killAndRestart(ctx context.Context, r *faultRegistry) error {
	if err := r.primary.Kill(); err != nil {
		return err
	}
	return r.primary.Resume(ctx)
}

// benchReplicaHung: the replica holding the member SIGSTOPped for
// replicaHang (and until the other took it over), then SIGCONT. s-to-fresh
// is from SIGSTOP until a member change reached the other's watch,
// woken-s-to-fresh from SIGCONT until one reached the woken replica's.
func benchReplicaHung(b *testing.B, e *env) {
	m := startFaultMember(b, e, "platform-apiserver-replica-hung")
	rec := recovery{}
	for run := 1; b.Loop(); run++ {
		rec.replicaHung(b, m, run)
	}
	rec.report(b)
}

func (rec recovery) replicaHung(b *testing.B, m *faultMember, run int) {
	ctx := b.Context()
	victim, survivor := m.beforeFault(b)
	mark := victim.watch.mark()
	pid := victim.PID()
	if pid == 0 { // kill(0) would stop this process group
		b.Fatalf("%s has exited", victim.Name())
	}
	must(b, syscall.Kill(pid, syscall.SIGSTOP))
	stopped := time.Now()
	hung := true
	defer func() {
		if hung {
			_ = syscall.Kill(pid, syscall.SIGCONT)
		}
	}()
	takenOver, err := m.changeSeenBy(ctx, survivor)
	must(b, err)
	must(b, sleepCtx(ctx, time.Until(stopped.Add(replicaHang))))
	must(b, syscall.Kill(pid, syscall.SIGCONT))
	hung = false
	woke := time.Now()
	seen, err := m.changeSeenBy(ctx, victim)
	must(b, err)
	rec.add("s-to-fresh", takenOver.Sub(stopped))
	rec.add("woken-s-to-fresh", seen.Sub(woke))
	b.Logf("run %d: %s stopped %s; the change after the SIGSTOP watched on %s at %s; after SIGCONT a change watched on the woken replica at %s; its watch streams ended: %q",
		run, victim.Name(), seconds(woke.Sub(stopped)), survivor.Name(), seconds(takenOver.Sub(stopped)), seconds(seen.Sub(woke)), victim.watch.endingsSince(mark))
}

// benchReplicaKilled: the replica holding the member SIGKILLed; s-to-fresh
// until a member change reached the other's watch. A new replica replaces it.
func benchReplicaKilled(b *testing.B, e *env) {
	ctx := b.Context()
	m := startFaultMember(b, e, "platform-apiserver-replica-killed")
	rec := recovery{}
	for run := 1; b.Loop(); run++ {
		victim, survivor := m.beforeFault(b)
		killed := time.Now()
		must(b, victim.Kill())
		takenOver, err := m.changeSeenBy(ctx, survivor)
		must(b, err)
		rec.add("s-to-fresh", takenOver.Sub(killed))
		b.Logf("run %d: %s killed; the change after the kill watched on %s at %s", run, victim.Name(), survivor.Name(), seconds(takenOver.Sub(killed)))
		must(b, m.replace(ctx, victim))
	}
	rec.report(b)
}

// startFaultRegistry starts a fault registry, stopped when b ends.
func startFaultRegistry(b *testing.B, e *env, name string) *faultRegistry {
	b.Helper()
	r, err := e.startFaultRegistry(b.Context(), name)
	if err != nil {
		if r != nil {
			_ = r.stop()
		}
		b.Fatalf("start registry %s: %v", name, err)
	}
	b.Cleanup(func() { stopFaultRegistry(b, r) })
	return r
}

// stopFaultRegistry stops r once (a run's defer and b's cleanup both call it).
func stopFaultRegistry(b *testing.B, r *faultRegistry) {
	if r.stopped {
		return
	}
	r.stopped = true
	if err := r.stop(); err != nil {
		b.Errorf("stop registry of %s: %v", r.replica.Name(), err)
	}
}

// startFaultMember starts the replica faults' set-up, stopped when b ends.
func startFaultMember(b *testing.B, e *env, prefix string) *faultMember {
	b.Helper()
	m, err := e.startFaultMember(b.Context(), prefix)
	b.Cleanup(func() {
		if err := m.stop(); err != nil {
			b.Errorf("stop replicas: %v", err)
		}
	})
	must(b, err)
	return m
}

// beforeFault waits until both replicas watch the mirrored member and
// returns the one holding it and the other.
func (m *faultMember) beforeFault(b *testing.B) (holding, other *discoveryReplica) {
	b.Helper()
	must(b, m.settle(b.Context()))
	i, err := m.holder(b.Context())
	must(b, err)
	return m.replicas[i], m.replicas[1-i]
}

// recovery is each metric's duration per run.
type recovery map[string][]time.Duration

func (r recovery) add(metric string, d time.Duration) { r[metric] = append(r[metric], d) }

func (r recovery) report(b *testing.B) {
	for metric, samples := range r {
		var h latencies
		h.add(samples...)
		b.ReportMetric(h.quantile(0.5).Seconds(), metric+"-p50")
		b.ReportMetric(h.max.Seconds(), metric+"-max")
	}
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func seconds(d time.Duration) string { return fmt.Sprintf("%.2f s", d.Seconds()) }
