package writes_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/example/platform-apiserver/pkg/registry/store"
)

// BenchmarkCommitBehindAbortedTickets measures the latency of a small
// write (one node of one member, changed, so it waits for the earlier
// tickets and publishes) with n aborted tickets between the published one
// and its own: before each write the ticket sequence moves n past the
// last ticket. That is what n writers that rolled back after taking their
// ticket leave behind: a ticket's locks and settings end with its
// transaction, its number does not. Up to 64 the wait locks each ticket in
// between, past that it reads pg_locks (migration 026); held=6000 runs
// beside 100 idle transactions holding 60 advisory locks each, which that
// read copies too. wait=023 runs the same on a registry migrated back to
// 025 (a lock per ticket in between; with 100,000 it fails with "out of
// shared memory"). It reports the p50 and p99 of the writes;
// docs/benchmarks.md, "Commits behind aborted tickets", has the command
// and the numbers.
func BenchmarkCommitBehindAbortedTickets(b *testing.B) {
	type run struct {
		wait      string
		n         int64
		held      int
		heldLocks int
	}
	runs := []run{
		{wait: "026", n: 0}, {wait: "026", n: 1}, {wait: "026", n: 10_000}, {wait: "026", n: 1_000_000},
		{wait: "026", n: 10_000, held: 100, heldLocks: 60},
		{wait: "023", n: 0}, {wait: "023", n: 1}, {wait: "023", n: 10_000},
	}
	for _, r := range runs {
		name := fmt.Sprintf("wait=%s/aborted=%d", r.wait, r.n)
		if r.held > 0 {
			name += fmt.Sprintf("/held=%d", r.held*r.heldLocks)
		}
		b.Run(name, func(b *testing.B) {
			s, dsn := benchStore(b)
			ctx := b.Context()
			if r.wait == "023" {
				if err := s.MigrateDownTo(ctx, 25); err != nil {
					b.Fatal(err)
				}
			}
			conn, err := pgx.Connect(ctx, dsn)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = conn.Close(ctx) })
			for i := range r.held {
				holder, err := pgx.Connect(ctx, dsn)
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { _ = holder.Close(ctx) })
				tx, err := holder.Begin(ctx)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(42, g) FROM generate_series($1::int, $1::int + $2::int - 1) g`, i*r.heldLocks, r.heldLocks); err != nil {
					b.Fatal(err)
				}
			}
			batches := [2]store.Batch{
				{ClusterID: "c", Nodes: []store.Node{node("n0", 1000, gib)}},
				{ClusterID: "c", Nodes: []store.Node{node("n0", 2000, gib)}},
			}
			benchApply(b, s, ctx, batches[1])
			var took []time.Duration
			for b.Loop() {
				b.StopTimer()
				if _, err := conn.Exec(ctx, `SELECT setval('registry_ticket', (SELECT last_value FROM registry_ticket) + $1::bigint)`, r.n); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				begin := time.Now()
				benchApply(b, s, ctx, batches[len(took)%2])
				took = append(took, time.Since(begin))
			}
			slices.Sort(took)
			ms := func(q float64) float64 {
				return float64(took[min(len(took)-1, int(q*float64(len(took))))].Microseconds()) / 1000
			}
			b.ReportMetric(ms(0.5), "p50-ms")
			b.ReportMetric(ms(0.99), "p99-ms")
		})
	}
}
