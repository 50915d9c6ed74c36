package postgres_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/example/platform-apiserver/pkg/registry/postgres"
	"github.com/example/platform-apiserver/pkg/registry/store"
)

// TestViewsSectionsRunSideBySideAndCommitInTicketOrder: while an earlier
// writer holds its commit ticket, a write of another member runs its views
// section and then waits for that ticket, not before it; nothing of it is
// visible until the earlier writer ends, and their versions are in commit
// order, so a reader at any published version has every change below it.
func TestViewsSectionsRunSideBySideAndCommitInTicketOrder(t *testing.T) {
	t.Parallel()
	s, b := setup(t, postgres.Options{})
	ctx := b.ctx
	mustApply(t, s, ctx, store.Batch{ClusterID: "late", Nodes: []store.Node{node("l0", 1000, gib)}})
	start := registryRV(t, s, ctx)

	conn, err := pgx.Connect(ctx, b.dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	count := func(sql string, args ...any) (n int64) {
		t.Helper()
		if err := conn.QueryRow(ctx, sql, args...).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	early := holdLock(t, b, `SELECT registry_take_ticket()`)
	done := make(chan error, 1)
	go func() {
		done <- s.Apply(ctx, store.Batch{ClusterID: "late", Nodes: []store.Node{node("l0", 2000, gib), node("l1", 1000, gib)}})
	}()
	poll(t, "the later write to wait for the earlier ticket", func() bool {
		return count(`SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND classid::bigint = $1 AND mode = 'ShareLock' AND NOT granted`,
			int64(postgres.TicketClass)) == 1
	})
	// Its views section ran: the rows are stamped, in its own transaction.
	if got := count(`SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() AND query LIKE '%registry_wait_tickets%'`); got != 1 {
		t.Fatalf("%d sessions wait for earlier tickets, want the later write's", got)
	}
	if rv := registryRV(t, s, ctx); rv != start {
		t.Errorf("registry resourceVersion moved from %d to %d while the earlier ticket is open", start, rv)
	}
	if n := getNode(t, s, ctx, "late", "l0"); n.Node.Capacity.CPUMillis != 1000 {
		t.Errorf("l0 shows %dm before the earlier ticket ended, want the old 1000m", n.Node.Capacity.CPUMillis)
	}
	// The earlier writer stamps a row of its member and commits.
	if _, err := early.Exec(ctx, `INSERT INTO cluster_node (cluster_id, name, resource_version) VALUES ('early', 'e0', registry_next_rv())`); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		t.Fatalf("the later write committed (%v) before the earlier ticket ended", err)
	case <-time.After(100 * time.Millisecond):
	}
	if err := early.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("the later write: %v", err)
	}

	var earlyMax, lateMin int64
	if err := conn.QueryRow(ctx, `SELECT max(resource_version) FILTER (WHERE cluster_id = 'early'), min(resource_version) FILTER (WHERE cluster_id = 'late')
		FROM registry_change WHERE resource_version > $1`, start).Scan(&earlyMax, &lateMin); err != nil {
		t.Fatal(err)
	}
	if earlyMax == 0 || lateMin == 0 || earlyMax >= lateMin {
		t.Errorf("the earlier ticket's change at %d, the later one's from %d: want every earlier version below every later one", earlyMax, lateMin)
	}
	if rv, top := registryRV(t, s, ctx), count(`SELECT max(resource_version) FROM registry_change`); rv != top {
		t.Errorf("registry resourceVersion %d, highest change %d: want them equal", rv, top)
	}
}

// TestTicketBelowAPublishedVersionIsTakenAgain: a ticket whose number is
// below a version already published (a later ticket took its lock shared
// before this one was locked, and so did not wait for it) is given up for
// a new one, so nothing is stamped below a version a reader may hold.
func TestTicketBelowAPublishedVersionIsTakenAgain(t *testing.T) {
	t.Parallel()
	s, b := setup(t, postgres.Options{})
	ctx := b.ctx
	if _, err := queryExec(t, b, `SELECT setval('registry_ticket', 100)`); err != nil {
		t.Fatal(err)
	}
	mustApply(t, s, ctx, store.Batch{ClusterID: "c", Nodes: []store.Node{node("n0", 1000, gib)}})
	published := registryRV(t, s, ctx)
	if published>>22 != 101 {
		t.Fatalf("registry resourceVersion %d, want one of ticket 101", published)
	}
	// Tickets 99, 100 and 101 come next, all at or below the published one.
	if _, err := queryExec(t, b, `SELECT setval('registry_ticket', 98)`); err != nil {
		t.Fatal(err)
	}
	var base int64
	if err := queryRow(t, b, `SELECT registry_take_ticket()`).Scan(&base); err != nil {
		t.Fatal(err)
	}
	if base != 102<<22 {
		t.Errorf("ticket base %d (ticket %d), want ticket 102's, the first above the published %d", base, base>>22, published)
	}
}

// TestTicketHoldsABoundedNumberOfVersions: a transaction that stamped more
// versions than its ticket holds fails before it publishes, rather than
// stamping versions a later ticket hands out too.
func TestTicketHoldsABoundedNumberOfVersions(t *testing.T) {
	t.Parallel()
	_, b := setup(t, postgres.Options{})
	tx := holdLock(t, b, `SELECT registry_take_ticket()`)
	defer func() { _ = tx.Rollback(b.ctx) }()
	// As if it had stamped 2^22 versions.
	if _, err := tx.Exec(b.ctx, `SELECT set_config('registry.next_rv', ((current_setting('registry.ticket')::bigint + 1) << 22 + 1)::text, true)`); err != nil {
		t.Fatal(err)
	}
	_, err := tx.Exec(b.ctx, `SELECT registry_wait_tickets(0)`)
	if err == nil || !strings.Contains(err.Error(), "stamped more than 4194303 resourceVersions") {
		t.Fatalf("wait after 2^22 versions: %v, want it refused", err)
	}
}

// TestUsageExpirySkipsABusyMember: the expiry stamps only the rows of
// members whose lock is free (a views section must not wait for a member's
// writer, which may wait for the expiry's ticket); a busy member's usage
// is made unknown by the next maintenance.
func TestUsageExpirySkipsABusyMember(t *testing.T) {
	t.Parallel()
	s, b := setup(t, postgres.Options{})
	ctx := b.ctx
	t0 := time.Now().UTC().Truncate(time.Hour).Add(10 * time.Hour)
	var samples []store.NodeMetricsSample
	for _, c := range []string{"busy", "free"} {
		mustApply(t, s, ctx, store.Batch{ClusterID: c, Nodes: []store.Node{node("n0", metricsNodeCPU, metricsNodeMem)}})
		samples = append(samples, store.NodeMetricsSample{ClusterID: c, Node: "n0", CPUNanoCores: 1e8, MemoryBytes: gib, ObservedAt: t0.Add(-3 * time.Hour)})
	}
	for _, sample := range samples {
		if _, err := s.RecordNodeMetrics(ctx, store.Fence{ClusterID: sample.ClusterID}, []store.NodeMetricsSample{sample}, policy); err != nil {
			t.Fatal(err)
		}
	}
	maintenance := store.MetricsMaintenance{Now: t0, RetainAfter: t0.Add(-24 * time.Hour), UnknownBefore: t0.Add(-time.Hour)}
	busy := holdLock(t, b, `SELECT pg_advisory_xact_lock($1, hashtext('busy'))`, postgres.MemberLockClass)
	got, err := s.MaintainNodeMetrics(ctx, maintenance)
	if err != nil || got.Unknown != 1 {
		t.Fatalf("MaintainNodeMetrics while member busy is locked = %+v, %v; want the free member's node alone made unknown", got, err)
	}
	if u := getNode(t, s, ctx, "busy", "n0").Usage; u == nil {
		t.Errorf("the busy member's node lost its usage while the member was locked")
	}
	if err := busy.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if got, err := s.MaintainNodeMetrics(ctx, maintenance); err != nil || got.Unknown != 1 {
		t.Fatalf("MaintainNodeMetrics once the member is free = %+v, %v; want its node made unknown", got, err)
	}
	if u := getNode(t, s, ctx, "busy", "n0").Usage; u != nil {
		t.Errorf("the busy member's node shows usage %+v after the next maintenance, want unknown", u)
	}
}
