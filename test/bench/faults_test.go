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
	// primaryHang is how long the hung primary stays SIGSTOPped before
	// SIGCONT: long enough for the change feed's read to time out (10 s)
	// and readiness to fail (measured 17.6–17.8 s), short of the request
	// timeout (60 s).
	primaryHang = 20 * time.Second
	// replicaHang is how long a hung replica stays SIGSTOPped at least:
	// twice discovery's lease duration (15 s). It stays stopped longer if
	// its member has not been taken over by then.
	replicaHang = 30 * time.Second
)

// BenchmarkFaultRecovery measures, for each fault of docs/faults.md that can
// be made on this machine's real stack, how long until the view is fresh
// again: from the end of the fault (SIGCONT, the restart, the promotion) or,
// for a lost replica, from the fault itself, until a change made after that
// point reaches a watch that was open before the fault. One iteration is one
// run of the fault (-benchtime 3x: three runs); each sub-benchmark reports
// the p50 and max over its runs as s-to-fresh-p50 and s-to-fresh-max.
//
// The primary faults run on registries of their own (a primary, a streaming
// standby and a platform-apiserver replica on their multi-host DSN) and
// watch on the replica's own port; the replica faults run two discovery
// replicas sharing the framework's kube-apiserver as member through its
// Lease, with a watch on each. A black-holed primary host is not made:
// loopback cannot drop packets without a network namespace.
func BenchmarkFaultRecovery(b *testing.B) {
	e := benchEnv(b, envOptions{name: "faults"})
	b.Run("fault=primary-hung-then-back", func(b *testing.B) { benchPrimaryHungThenBack(b, e) })
	b.Run("fault=primary-hung-standby-promoted", func(b *testing.B) { benchPromoted(b, e, "hung-promoted", hang, true) })
	b.Run("fault=primary-hung-standby-promoted-lost-commits", func(b *testing.B) {
		benchPromoted(b, e, "hung-promoted-lost-commits", hangLosingCommits, true)
	})
	b.Run("fault=primary-killed-restarted", func(b *testing.B) { benchPrimaryKilledRestarted(b, e) })
	// A failover without lost commits: a fast shutdown sends every commit to
	// the standby before the primary exits.
	b.Run("fault=primary-stopped-standby-promoted", func(b *testing.B) {
		benchPromoted(b, e, "stopped-promoted", func(_ context.Context, r *faultRegistry) error { return r.primary.Pause() }, false)
	})
	b.Run("fault=replica-hung-past-lease", func(b *testing.B) { benchReplicaHung(b, e) })
	b.Run("fault=replica-killed", func(b *testing.B) { benchReplicaKilled(b, e) })
}

// benchPrimaryHungThenBack: every process of the primary SIGSTOPped for
// primaryHang, a change committed (through a connection the writer had
// open) during the hang, SIGCONT, another change; s-to-fresh is from
// SIGCONT until both reached the watch.
func benchPrimaryHungThenBack(b *testing.B, e *env) {
	ctx := b.Context()
	r := startFaultRegistry(b, e, "platform-apiserver-primary-hung")
	rec := recovery{}
	for run := 1; b.Loop(); run++ {
		if err := r.beforeFault(ctx); err != nil {
			b.Fatal(err)
		}
		mark := r.watch.mark()
		if err := r.primary.Freeze(); err != nil {
			b.Fatal(err)
		}
		during := r.next()
		duringErr := make(chan error, 1)
		go func() {
			_, err := r.commit(ctx, r.writer, during)
			duringErr <- err
		}()
		if err := sleepCtx(ctx, primaryHang); err != nil {
			b.Fatal(err)
		}
		if err := r.primary.Thaw(); err != nil {
			b.Fatal(err)
		}
		back := time.Now()
		after := r.next()
		committed, err := r.commit(ctx, r.writer, after)
		if err != nil {
			b.Fatal(err)
		}
		if err := <-duringErr; err != nil {
			b.Fatal(err)
		}
		seenDuring, err := r.watch.await(ctx, during, freshTimeout)
		if err != nil {
			b.Fatal(err)
		}
		seenAfter, err := r.watch.await(ctx, after, freshTimeout)
		if err != nil {
			b.Fatal(err)
		}
		rec.add("s-to-fresh", later(seenDuring, seenAfter).Sub(back))
		rec.add("s-to-commit", committed.Sub(back))
		b.Logf("run %d: after SIGCONT: the change made during the hang watched at %s, the one made after at %s (committed at %s); watch streams ended: %q",
			run, seconds(seenDuring.Sub(back)), seconds(seenAfter.Sub(back)), seconds(committed.Sub(back)), r.watch.endingsSince(mark))
	}
	rec.report(b)
}

// benchPromoted: the primary made unusable by fault, then the standby
// promoted; s-to-fresh is from the promotion until a change committed after
// it reached the watch. Each run has a registry of its own. After a hang
// (the primary SIGSTOPped for good, its sockets open) the change is written
// by a store opened after the promotion, as discovery's next commit is made
// on a new connection once the feed has dropped the hung server's (a commit
// caught on the hung server waits out its minute; not measured); else by
// the writer whose connections died with the old primary.
func benchPromoted(b *testing.B, e *env, name string, fault func(context.Context, *faultRegistry) error, hung bool) {
	ctx := b.Context()
	rec := recovery{}
	for run := 1; b.Loop(); run++ {
		func() {
			r := startFaultRegistry(b, e, fmt.Sprintf("platform-apiserver-%s-%d", name, run))
			defer stopFaultRegistry(b, r)
			if err := r.beforeFault(ctx); err != nil {
				b.Fatal(err)
			}
			mark := r.watch.mark()
			began := time.Now()
			if err := fault(ctx, r); err != nil {
				b.Fatal(err)
			}
			if err := r.standby.Promote(ctx); err != nil {
				b.Fatal(err)
			}
			promoted := time.Now()
			w := r.writer
			if hung {
				var err error
				if w, err = registrypostgres.Open(ctx, r.dsn, registrypostgres.Options{}); err != nil {
					b.Fatal(err)
				}
				defer w.Close()
			}
			committed, seen, err := r.commitAndAwait(ctx, w)
			if err != nil {
				b.Fatal(err)
			}
			rec.add("s-to-fresh", seen.Sub(promoted))
			rec.add("s-to-commit", committed.Sub(promoted))
			b.Logf("run %d: promoted %s after the fault began; after the promotion: committed at %s, watched at %s; watch streams ended: %q",
				run, seconds(promoted.Sub(began)), seconds(committed.Sub(promoted)), seconds(seen.Sub(promoted)), r.watch.endingsSince(mark))
		}()
	}
	rec.report(b)
}

// hang SIGSTOPs every process of the primary.
func hang(_ context.Context, r *faultRegistry) error { return r.primary.Freeze() }

// hangLosingCommits is hang with the standby stopped before a last change
// (which the watch sees) and started again after the hang began, so the
// promotion loses that change.
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

// benchPrimaryKilledRestarted: the primary SIGKILLed (every process, as a
// crash) and started again at once on its data and port (crash recovery);
// s-to-fresh is from the restart returning (the server accepts
// connections) until a change committed after it reached the watch.
func benchPrimaryKilledRestarted(b *testing.B, e *env) {
	ctx := b.Context()
	r := startFaultRegistry(b, e, "platform-apiserver-primary-killed")
	rec := recovery{}
	for run := 1; b.Loop(); run++ {
		if err := r.beforeFault(ctx); err != nil {
			b.Fatal(err)
		}
		mark := r.watch.mark()
		killed := time.Now()
		if err := r.primary.Kill(); err != nil {
			b.Fatal(err)
		}
		if err := r.primary.Resume(ctx); err != nil {
			b.Fatal(err)
		}
		back := time.Now()
		committed, seen, err := r.commitAndAwait(ctx, r.writer)
		if err != nil {
			b.Fatal(err)
		}
		rec.add("s-to-fresh", seen.Sub(back))
		rec.add("s-to-restart", back.Sub(killed))
		b.Logf("run %d: restarted %s after the kill; after the restart: committed at %s, watched at %s; watch streams ended: %q",
			run, seconds(back.Sub(killed)), seconds(committed.Sub(back)), seconds(seen.Sub(back)), r.watch.endingsSince(mark))
	}
	rec.report(b)
}

// benchReplicaHung: the replica holding the member's Lease SIGSTOPped for
// replicaHang (and until its member was taken over), then SIGCONT.
// s-to-fresh is from the SIGSTOP until a change made in the member after it
// reached the other replica's watch (the other replica took the member
// over); woken-s-to-fresh is from SIGCONT until a change made after it
// reached the watch open on the woken replica since before the fault.
func benchReplicaHung(b *testing.B, e *env) {
	m := startFaultMember(b, e, "platform-apiserver-replica-hung")
	rec := recovery{}
	for run := 1; b.Loop(); run++ {
		rec.replicaHung(b, m, run)
	}
	rec.report(b)
}

// replicaHung is one run of benchReplicaHung.
func (rec recovery) replicaHung(b *testing.B, m *faultMember, run int) {
	ctx := b.Context()
	victim, survivor := m.beforeFault(b)
	mark := victim.watch.mark()
	pid := victim.PID()
	if pid == 0 { // kill(0) would stop this process group
		b.Fatalf("%s has exited", victim.Name())
	}
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		b.Fatal(err)
	}
	stopped := time.Now()
	hung := true
	defer func() {
		if hung {
			_ = syscall.Kill(pid, syscall.SIGCONT)
		}
	}()
	v, err := m.change(ctx)
	if err != nil {
		b.Fatal(err)
	}
	takenOver, err := survivor.watch.await(ctx, v, freshTimeout)
	if err != nil {
		b.Fatal(err)
	}
	if err := sleepCtx(ctx, time.Until(stopped.Add(replicaHang))); err != nil {
		b.Fatal(err)
	}
	if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
		b.Fatal(err)
	}
	hung = false
	woke := time.Now()
	if v, err = m.change(ctx); err != nil {
		b.Fatal(err)
	}
	seen, err := victim.watch.await(ctx, v, freshTimeout)
	if err != nil {
		b.Fatal(err)
	}
	rec.add("s-to-fresh", takenOver.Sub(stopped))
	rec.add("woken-s-to-fresh", seen.Sub(woke))
	b.Logf("run %d: %s stopped %s; the change after the SIGSTOP watched on %s at %s; after SIGCONT a change watched on the woken replica at %s; its watch streams ended: %q",
		run, victim.Name(), seconds(woke.Sub(stopped)), survivor.Name(), seconds(takenOver.Sub(stopped)), seconds(seen.Sub(woke)), victim.watch.endingsSince(mark))
}

// benchReplicaKilled: the replica holding the member's Lease SIGKILLed;
// s-to-fresh is from the kill until a change made in the member after it
// reached the other replica's watch. A new replica replaces the killed one
// for the next run.
func benchReplicaKilled(b *testing.B, e *env) {
	ctx := b.Context()
	m := startFaultMember(b, e, "platform-apiserver-replica-killed")
	rec := recovery{}
	for run := 1; b.Loop(); run++ {
		victim, survivor := m.beforeFault(b)
		killed := time.Now()
		if err := victim.Kill(); err != nil {
			b.Fatal(err)
		}
		v, err := m.change(ctx)
		if err != nil {
			b.Fatal(err)
		}
		takenOver, err := survivor.watch.await(ctx, v, freshTimeout)
		if err != nil {
			b.Fatal(err)
		}
		rec.add("s-to-fresh", takenOver.Sub(killed))
		b.Logf("run %d: %s killed; the change after the kill watched on %s at %s", run, victim.Name(), survivor.Name(), seconds(takenOver.Sub(killed)))
		if err := m.replace(ctx, victim); err != nil {
			b.Fatal(err)
		}
	}
	rec.report(b)
}

// startFaultRegistry starts a fault registry for b and stops it when b ends.
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

// stopFaultRegistry stops r once (a run's deferred stop and b's cleanup
// may both call it).
func stopFaultRegistry(b *testing.B, r *faultRegistry) {
	if r.stopped {
		return
	}
	r.stopped = true
	if err := r.stop(); err != nil {
		b.Errorf("stop registry of %s: %v", r.replica.Name(), err)
	}
}

// startFaultMember starts the replica faults' set-up for b and stops it
// when b ends.
func startFaultMember(b *testing.B, e *env, prefix string) *faultMember {
	b.Helper()
	m, err := e.startFaultMember(b.Context(), prefix)
	b.Cleanup(func() {
		if err := m.stop(); err != nil {
			b.Errorf("stop replicas: %v", err)
		}
	})
	if err != nil {
		b.Fatal(err)
	}
	return m
}

// beforeFault waits until the member is mirrored and both replicas watch
// the registry, and returns the replica holding the member and the other.
func (m *faultMember) beforeFault(b *testing.B) (holding, other *discoveryReplica) {
	b.Helper()
	if err := m.settle(b.Context()); err != nil {
		b.Fatal(err)
	}
	i, err := m.holder(b.Context())
	if err != nil {
		b.Fatal(err)
	}
	return m.replicas[i], m.replicas[1-i]
}

// recovery collects one duration per run under each metric name.
type recovery map[string][]time.Duration

func (r recovery) add(metric string, d time.Duration) { r[metric] = append(r[metric], d) }

// report reports each metric's p50 and max over the runs, in seconds.
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
