package writes_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/example/platform-apiserver/pkg/registry/postgres"
	"github.com/example/platform-apiserver/pkg/registry/postgres/schema"
	"github.com/example/platform-apiserver/pkg/registry/postgres/writes"
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
	ctx := b.Ctx
	mustApply(t, s, ctx, store.Batch{ClusterID: "late", Nodes: []store.Node{node("l0", 1000, gib)}})
	start := registryRV(t, s, ctx)

	conn, err := pgx.Connect(ctx, b.DSN)
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
		return count(`SELECT count(*) FROM pg_locks WHERE database = (SELECT oid FROM pg_database WHERE datname = current_database()) AND locktype = 'advisory' AND classid::bigint = $1 AND mode = 'ShareLock' AND NOT granted`,
			int64(schema.TicketClass)) == 1
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
	commitEarlier(t, ctx, early, done)
	if err := <-done; err != nil {
		t.Fatalf("the later write: %v", err)
	}

	assertTicketOrder(t, s, ctx, conn, start)
}

// assertTicketOrder checks that every change of member "early" since start
// is below every change of member "late", and that the registry's
// resourceVersion is the highest change.
func assertTicketOrder(t *testing.T, s *postgres.Store, ctx context.Context, conn *pgx.Conn, start int64) {
	t.Helper()
	var earlyMax, lateMin, top int64
	if err := conn.QueryRow(ctx, `SELECT coalesce(max(resource_version) FILTER (WHERE cluster_id = 'early'), 0),
			coalesce(min(resource_version) FILTER (WHERE cluster_id = 'late'), 0), max(resource_version)
		FROM registry_change WHERE resource_version > $1`, start).Scan(&earlyMax, &lateMin, &top); err != nil {
		t.Fatal(err)
	}
	if earlyMax == 0 || lateMin == 0 || earlyMax >= lateMin {
		t.Errorf("the earlier ticket's change at %d, the later one's from %d: want every earlier version below every later one", earlyMax, lateMin)
	}
	if rv := registryRV(t, s, ctx); rv != top {
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
	ctx := b.Ctx
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
	defer func() { _ = tx.Rollback(b.Ctx) }()
	// As if it had stamped 2^22 versions.
	if _, err := tx.Exec(b.Ctx, `SELECT set_config('registry.next_rv', ((current_setting('registry.ticket')::bigint + 1) << 22 + 1)::text, true)`); err != nil {
		t.Fatal(err)
	}
	_, err := tx.Exec(b.Ctx, `SELECT registry_wait_tickets(0)`)
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
	ctx := b.Ctx
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
	busy := holdLock(t, b, `SELECT pg_advisory_xact_lock($1, hashtext('busy'))`, writes.MemberLockClass)
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

// abortTickets takes n commit tickets in transactions that roll back, as
// writers that fail after their ticket do. As round trips, each one
// BEGIN; SELECT registry_take_ticket(); ROLLBACK of its own (about 55 µs
// each here). Otherwise in one statement, each in a subtransaction: a
// PL/pgSQL block that takes the ticket and raises into its exception
// handler (about 13 µs each). A subtransaction's abort releases the locks
// it took (the barrier and the ticket's) and undoes its set_config, as a
// rollback does a transaction's; what outlasts either is the ticket
// sequence's advance.
func abortTickets(t *testing.T, ctx context.Context, conn *pgx.Conn, n int, roundTrips bool) {
	t.Helper()
	if roundTrips {
		for range n {
			if _, err := conn.Exec(ctx, `BEGIN; SELECT registry_take_ticket(); ROLLBACK`, pgx.QueryExecModeSimpleProtocol); err != nil {
				t.Fatal(err)
			}
		}
		return
	}
	if _, err := conn.Exec(ctx, `DO $$
		BEGIN
		    FOR i IN 1..`+strconv.Itoa(n)+` LOOP
		        BEGIN
		            PERFORM registry_take_ticket();
		            RAISE SQLSTATE 'P0001';
		        EXCEPTION WHEN SQLSTATE 'P0001' THEN
		        END;
		    END LOOP;
		END $$`); err != nil {
		t.Fatal(err)
	}
	var held int64
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_locks WHERE pid = pg_backend_pid() AND locktype = 'advisory'`).Scan(&held); err != nil || held != 0 {
		t.Fatalf("%d advisory locks held after the aborted tickets (%v), want none", held, err)
	}
}

// scannedGap is a number of aborted tickets that makes the next writer's
// wait read pg_locks: with at most 64 tickets between the published one
// and its own it locks each, as migration 023 did.
const scannedGap = 100

// applyBehind runs a write of member "late" in the background, as the
// writer whose wait a test watches.
func applyBehind(s *postgres.Store, ctx context.Context, nodes ...store.Node) <-chan error {
	done := make(chan error, 1)
	go func() { done <- s.Apply(ctx, store.Batch{ClusterID: "late", Nodes: nodes}) }()
	return done
}

// waitingWriter waits until a writer waits for earlier tickets, in the
// given wait event or type of event (Lock for a shared lock on a ticket,
// PgSleep while a taker is between its barrier and its ticket's lock), and
// returns its pid; it fails the test if the write ends first.
func waitingWriter(t *testing.T, ctx context.Context, conn *pgx.Conn, done <-chan error, event string) (pid int32) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case err := <-done:
			t.Fatalf("the write ended (%v) before it waited for an earlier ticket", err)
		default:
		}
		err := conn.QueryRow(ctx, `SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()
			AND query LIKE '%registry_wait_tickets%' AND $1 IN (wait_event_type, wait_event)`, event).Scan(&pid)
		if err == nil {
			return pid
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("no writer waits for an earlier ticket in wait event %s", event)
	return 0
}

// ticketLocks counts the advisory locks of the commit tickets' class a
// session holds or waits for, in mode (empty: any) and on ticket (-1 for
// any ticket; the barrier is not a ticket).
func ticketLocks(t *testing.T, ctx context.Context, conn *pgx.Conn, pid int32, mode string, ticket int64) (n int64) {
	t.Helper()
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_locks WHERE pid = $1 AND locktype = 'advisory' AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
			AND classid::bigint = $2 AND objsubid = 2 AND ($3 = '' OR mode = $3) AND ($4::bigint < 0 AND objid::bigint <> 4294967295 OR objid::bigint = $4::bigint % 2147483648)`,
		pid, int64(schema.TicketClass), mode, ticket).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// waitFinished waits for a background write; it fails the test if the
// write failed or took longer than within.
func waitFinished(t *testing.T, done <-chan error, within time.Duration) time.Duration {
	t.Helper()
	begin := time.Now()
	select {
	case err := <-done:
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == pgerrcode.OutOfMemory {
			t.Fatalf("the write ran out of shared memory: %v", err)
		}
		if err != nil {
			t.Fatalf("the write: %v", err)
		}
	case <-time.After(within):
		t.Fatalf("the write did not commit within %v", within)
	}
	return time.Since(begin)
}

// TestCommitBehindAbortedTickets: the tickets of transactions that aborted
// cost the next writer nothing. After 100,000 writers that rolled back
// right after their ticket (issue 50: each cost migration 023's wait a
// lock, and every commit then failed with "out of shared memory") the
// next write commits at once; after 1,000,000, a write waits for the one
// earlier ticket still in flight with one lock for it, and commits as
// soon as that ticket's transaction ends.
func TestCommitBehindAbortedTickets(t *testing.T) {
	t.Parallel()
	t.Run("100000 round trips, none in flight", func(t *testing.T) {
		t.Parallel()
		s, b := setup(t, postgres.Options{})
		ctx := b.Ctx
		mustApply(t, s, ctx, store.Batch{ClusterID: "late", Nodes: []store.Node{node("l0", 1000, gib)}})
		conn := b.Connect(t)
		begin := time.Now()
		abortTickets(t, ctx, conn, 100_000, true)
		t.Logf("100,000 aborted tickets in %v", time.Since(begin))
		took := waitFinished(t, applyBehind(s, ctx, node("l0", 2000, gib)), 10*time.Second)
		t.Logf("the next write committed in %v", took)
		if rv := registryRV(t, s, ctx); rv>>22 <= 100_000 {
			t.Errorf("registry resourceVersion %d (ticket %d), want one above the aborted tickets", rv, rv>>22)
		}
	})
	t.Run("1000000 in subtransactions, one in flight", func(t *testing.T) {
		t.Parallel()
		s, b := setup(t, postgres.Options{})
		ctx := b.Ctx
		mustApply(t, s, ctx, store.Batch{ClusterID: "late", Nodes: []store.Node{node("l0", 1000, gib)}})
		start := registryRV(t, s, ctx)
		conn := b.Connect(t)
		early := holdLock(t, b, `SELECT registry_take_ticket()`)
		begin := time.Now()
		abortTickets(t, ctx, conn, 1_000_000, false)
		t.Logf("1,000,000 aborted tickets in %v", time.Since(begin))
		done := applyBehind(s, ctx, node("l0", 2000, gib))
		pid := waitingWriter(t, ctx, conn, done, "Lock")
		// Beside the barrier, its own ticket and the one in flight, shared.
		if n := ticketLocks(t, ctx, conn, pid, "", -1); n != 2 {
			t.Errorf("the waiting writer holds or waits for %d ticket locks, want 2: its own and the one in flight", n)
		}
		if n := ticketLocks(t, ctx, conn, pid, "ShareLock", -1); n != 1 {
			t.Errorf("the waiting writer takes %d shared ticket locks, want 1", n)
		}
		var all int64
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_locks WHERE pid = $1`, pid).Scan(&all); err != nil {
			t.Fatal(err)
		}
		t.Logf("the waiting writer holds or waits for %d locks in all", all)
		if all > 100 {
			t.Errorf("the waiting writer holds or waits for %d locks, want a few dozen (its tables, member, ticket)", all)
		}
		commitEarlier(t, ctx, early, done)
		took := waitFinished(t, done, 10*time.Second)
		t.Logf("the write committed %v after the earlier ticket", took)
		assertTicketOrder(t, s, ctx, conn, start)
	})
}

// stepTaker takes a commit ticket one step at a time, as
// registry_take_ticket does: the barrier shared, a number, the number's
// lock, the check that no later ticket published, then versions from it.
type stepTaker struct {
	t   *testing.T
	ctx context.Context //nolint:containedctx // the test's
	tx  pgx.Tx
}

func newStepTaker(t *testing.T, b testBundle) *stepTaker {
	t.Helper()
	tx := holdLock(t, b, `SELECT pg_advisory_xact_lock_shared($1, -1)`, schema.TicketClass)
	t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
	return &stepTaker{t: t, ctx: b.Ctx, tx: tx}
}

func (x *stepTaker) nextval() (ticket int64) {
	x.t.Helper()
	if err := x.tx.QueryRow(x.ctx, `SELECT nextval('registry_ticket')`).Scan(&ticket); err != nil {
		x.t.Fatal(err)
	}
	return ticket
}

func (x *stepTaker) lock(ticket int64) error {
	_, err := x.tx.Exec(x.ctx, `SELECT pg_advisory_xact_lock($1, ($2::bigint % 2147483648)::int)`, schema.TicketClass, ticket)
	return err
}

// check says whether the ticket is still above every published version.
func (x *stepTaker) check(ticket int64) (ok bool) {
	x.t.Helper()
	if err := x.tx.QueryRow(x.ctx, `SELECT (SELECT resource_version FROM registry_state) < $1::bigint << 22`, ticket).Scan(&ok); err != nil {
		x.t.Fatal(err)
	}
	return ok
}

// stampAndCommit stamps a node row of member "early" from the ticket and
// commits.
func (x *stepTaker) stampAndCommit(ticket int64) {
	x.t.Helper()
	if _, err := x.tx.Exec(x.ctx, `SELECT set_config('registry.ticket', $1::bigint::text, true), set_config('registry.next_rv', (($1::bigint << 22) + 1)::text, true)`, ticket); err != nil {
		x.t.Fatal(err)
	}
	if _, err := x.tx.Exec(x.ctx, `INSERT INTO cluster_node (cluster_id, name, resource_version) VALUES ('early', 'e0', registry_next_rv())`); err != nil {
		x.t.Fatal(err)
	}
	if err := x.tx.Commit(x.ctx); err != nil {
		x.t.Fatal(err)
	}
}

// waitShareLock waits until the writer waits for a shared lock on ticket.
func waitShareLock(t *testing.T, ctx context.Context, conn *pgx.Conn, pid int32, ticket int64) {
	t.Helper()
	poll(t, "the writer to wait for the earlier ticket", func() bool {
		var n int64
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_locks WHERE pid = $1 AND locktype = 'advisory' AND classid::bigint = $2
				AND objid::bigint = $3::bigint % 2147483648 AND mode = 'ShareLock' AND NOT granted`, pid, int64(schema.TicketClass), ticket).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n == 1
	})
}

// TestWaitCoversATakerBetweenItsBarrierAndItsTicket: a taker that took its
// number before the writer's but locks it only after the writer looked at
// the locks is still waited for. The writer sees it share the barrier
// without a ticket and looks again until it has its lock; had the writer
// waited only for the ticket locks it saw, the taker would pass its check
// (nothing published yet) and commit versions below the writer's after it.
func TestWaitCoversATakerBetweenItsBarrierAndItsTicket(t *testing.T) {
	t.Parallel()
	s, b := setup(t, postgres.Options{})
	ctx := b.Ctx
	mustApply(t, s, ctx, store.Batch{ClusterID: "late", Nodes: []store.Node{node("l0", 1000, gib)}})
	start := registryRV(t, s, ctx)
	conn := b.Connect(t)

	x := newStepTaker(t, b)
	ticket := x.nextval()
	writeBehindAnUnlockedTicket(t, s, ctx, conn, x, ticket, start)
}

// commitEarlier has the earlier writer, early, stamp a row of its member
// and commit, once the later write (done) has been seen still waiting for
// it a while.
func commitEarlier(t *testing.T, ctx context.Context, early pgx.Tx, done <-chan error) {
	t.Helper()
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
}

// writeBehindAnUnlockedTicket makes the gap to the published ticket wide
// enough for the wait to read the lock table, then checks that a write
// waits while taker x holds the barrier and its ticket without the
// ticket's lock, then for x's transaction once x locks it, and commits
// after it in ticket order (versions from start).
func writeBehindAnUnlockedTicket(t *testing.T, s *postgres.Store, ctx context.Context, conn *pgx.Conn, x *stepTaker, ticket, start int64) {
	t.Helper()
	abortTickets(t, ctx, conn, scannedGap, true)
	done := applyBehind(s, ctx, node("l0", 2000, gib), node("l1", 1000, gib))
	pid := waitingWriter(t, ctx, conn, done, "PgSleep")
	select {
	case err := <-done:
		t.Fatalf("the write committed (%v) while an earlier ticket's taker had not locked it", err)
	case <-time.After(200 * time.Millisecond):
	}
	if err := x.lock(ticket); err != nil {
		t.Fatal(err)
	}
	waitShareLock(t, ctx, conn, pid, ticket)
	if !x.check(ticket) {
		t.Fatalf("ticket %d is below a published version before the later writer published", ticket)
	}
	x.stampAndCommit(ticket)
	waitFinished(t, done, 10*time.Second)
	assertTicketOrder(t, s, ctx, conn, start)
}

// TestWaitCoversATakerTakingATicketAgain: a taker whose first ticket was
// published past (a writer whose wait locks every ticket in between, as
// 023's did and 026's does for up to 64, took its lock shared before the
// taker did) holds that ticket's lock while it takes a new number. The writer, whose number came after that one, sees
// only a ticket at or below the published one and looks again until the
// taker locks its new ticket, then waits for it.
func TestWaitCoversATakerTakingATicketAgain(t *testing.T) {
	t.Parallel()
	s, b := setup(t, postgres.Options{})
	ctx := b.Ctx
	mustApply(t, s, ctx, store.Batch{ClusterID: "late", Nodes: []store.Node{node("l0", 1000, gib)}})
	conn := b.Connect(t)

	x := newStepTaker(t, b)
	first := x.nextval()
	// A writer with the next ticket takes the taker's ticket shared, as a
	// wait that locks every ticket in between does, and publishes its own
	// ticket.
	old := holdLock(t, b, `SELECT registry_take_ticket()`)
	var oldTicket int64
	if err := old.QueryRow(ctx, `SELECT current_setting('registry.ticket')::bigint`).Scan(&oldTicket); err != nil || oldTicket != first+1 {
		t.Fatalf("the other writer's ticket %d (%v), want %d", oldTicket, err, first+1)
	}
	if _, err := old.Exec(ctx, `SELECT pg_advisory_xact_lock_shared($1, ($2::bigint % 2147483648)::int)`, schema.TicketClass, first); err != nil {
		t.Fatal(err)
	}
	locked := make(chan error, 1)
	go func() { locked <- x.lock(first) }()
	poll(t, "the taker to wait for its ticket's lock", func() bool {
		var n int64
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_locks WHERE database = (SELECT oid FROM pg_database WHERE datname = current_database()) AND locktype = 'advisory' AND classid::bigint = $1 AND mode = 'ExclusiveLock' AND NOT granted`,
			int64(schema.TicketClass)).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n == 1
	})
	if _, err := old.Exec(ctx, `UPDATE registry_state SET resource_version = $1::bigint << 22`, oldTicket); err != nil {
		t.Fatal(err)
	}
	if err := old.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-locked; err != nil {
		t.Fatal(err)
	}
	if x.check(first) {
		t.Fatalf("ticket %d passed its check below the published ticket %d", first, oldTicket)
	}
	start := registryRV(t, s, ctx)
	again := x.nextval()
	writeBehindAnUnlockedTicket(t, s, ctx, conn, x, again, start)
}

// TestWaitBehindAWaiterLockingEveryTicketDoesNotDeadlock: a wait that
// locks every ticket in between (026's with at most 64, or 023's on a
// writer still running it while 026 commits) takes shared locks on
// tickets nobody locked yet. A taker then waits for its own ticket's lock
// behind such a writer while it shares the barrier, and that writer may
// wait for the writer here. The writer here does not wait for the taker
// to get its lock (nobody would: a cycle PostgreSQL cannot see) but asks
// the ticket's lock shared, as 023 did; PostgreSQL's deadlock check
// (deadlock_timeout, 1 s) grants it ahead of the taker, the write
// commits, and the taker, once it has its lock, finds the publish and
// would take a new ticket.
func TestWaitBehindAWaiterLockingEveryTicketDoesNotDeadlock(t *testing.T) {
	t.Parallel()
	s, b := setup(t, postgres.Options{})
	ctx := b.Ctx
	mustApply(t, s, ctx, store.Batch{ClusterID: "late", Nodes: []store.Node{node("l0", 1000, gib)}})
	conn := b.Connect(t)

	x := newStepTaker(t, b)
	ticket := x.nextval()
	abortTickets(t, ctx, conn, scannedGap, true)
	done := applyBehind(s, ctx, node("l0", 2000, gib))
	pid := waitingWriter(t, ctx, conn, done, "PgSleep")
	later := ticket + scannedGap + 1 // the writer's
	if n := ticketLocks(t, ctx, conn, pid, "ExclusiveLock", later); n != 1 {
		t.Fatalf("the writer does not hold ticket %d", later)
	}
	old := holdLock(t, b, `SELECT registry_take_ticket()`)
	t.Cleanup(func() { _ = old.Rollback(context.Background()) })
	if _, err := old.Exec(ctx, `SELECT pg_advisory_xact_lock_shared($1, ($2::bigint % 2147483648)::int)`, schema.TicketClass, ticket); err != nil {
		t.Fatal(err)
	}
	oldWaited := make(chan error, 1)
	go func() {
		_, err := old.Exec(ctx, `SELECT pg_advisory_xact_lock_shared($1, ($2::bigint % 2147483648)::int)`, schema.TicketClass, later)
		oldWaited <- err
	}()
	poll(t, "the other writer to wait for the writer's ticket", func() bool {
		var n int64
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_locks WHERE database = (SELECT oid FROM pg_database WHERE datname = current_database()) AND locktype = 'advisory' AND classid::bigint = $1 AND objid::bigint = $2::bigint % 2147483648 AND NOT granted`,
			int64(schema.TicketClass), later).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n == 1
	})
	locked := make(chan error, 1)
	go func() { locked <- x.lock(ticket) }()

	took := waitFinished(t, done, 20*time.Second)
	t.Logf("the write committed %v after the taker asked for its lock", took)
	if err := <-oldWaited; err != nil {
		t.Fatalf("the other writer: %v", err)
	}
	if err := old.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-locked; err != nil {
		t.Fatalf("the taker: %v", err)
	}
	if x.check(ticket) {
		t.Errorf("ticket %d passed its check after the later writer published", ticket)
	}
}

// TestWaitIgnoresATakerQueuedForTheTicketSequence: a taker that shares the
// barrier but waits for the ticket sequence's lock (DDL on the sequence,
// as a migration, waits for the writer's own nextval) has not taken its
// number: the writer does not wait for it, which would be a cycle
// PostgreSQL cannot see, and the taker's ticket comes after the writer's.
func TestWaitIgnoresATakerQueuedForTheTicketSequence(t *testing.T) {
	t.Parallel()
	_, b := setup(t, postgres.Options{})
	ctx := b.Ctx
	conn := b.Connect(t)
	abortTickets(t, ctx, conn, scannedGap, true)
	w := holdLock(t, b, `SELECT registry_take_ticket()`)
	t.Cleanup(func() { _ = w.Rollback(context.Background()) })
	var ticket int64
	if err := w.QueryRow(ctx, `SELECT current_setting('registry.ticket')::bigint`).Scan(&ticket); err != nil {
		t.Fatal(err)
	}
	ddl, err := b.Connect(t).Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ddl.Rollback(context.Background()) })
	altered := make(chan error, 1)
	go func() {
		_, err := ddl.Exec(ctx, `ALTER SEQUENCE registry_ticket INCREMENT BY 1`)
		altered <- err
	}()
	waitForLockWait(t, ctx, conn)
	taken := make(chan int64, 1)
	taker := b.Connect(t)
	go func() {
		var base int64
		_ = taker.QueryRow(ctx, `SELECT registry_take_ticket()`).Scan(&base)
		taken <- base >> 22
	}()
	poll(t, "the taker to share the barrier and wait for the sequence", func() bool {
		var n int64
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_locks WHERE database = (SELECT oid FROM pg_database WHERE datname = current_database()) AND locktype = 'relation' AND relation = 'registry_ticket'::regclass AND mode = 'RowExclusiveLock' AND NOT granted`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n == 1
	})
	waitCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var waited bool
	if err := w.QueryRow(waitCtx, `SELECT registry_wait_tickets(0)`).Scan(&waited); err != nil {
		t.Fatalf("the writer's wait: %v", err)
	}
	if err := w.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-altered; err != nil {
		t.Fatal(err)
	}
	if err := ddl.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if got := <-taken; got <= ticket {
		t.Errorf("the queued taker got ticket %d, want one above the writer's %d", got, ticket)
	}
}

// TestWaitFindsTicketsAcrossTheKeysWrap: a ticket's lock key is the ticket
// mod 2^31; a writer whose ticket's key wrapped to 0 still finds the
// earlier ticket in flight by its key 2^31 - 1, with the published ticket
// 2^31 tickets back (migration 023's wait would have asked 2^31 locks).
func TestWaitFindsTicketsAcrossTheKeysWrap(t *testing.T) {
	t.Parallel()
	s, b := setup(t, postgres.Options{})
	ctx := b.Ctx
	mustApply(t, s, ctx, store.Batch{ClusterID: "late", Nodes: []store.Node{node("l0", 1000, gib)}})
	start := registryRV(t, s, ctx)
	conn := b.Connect(t)
	if _, err := conn.Exec(ctx, `SELECT setval('registry_ticket', 2147483646)`); err != nil {
		t.Fatal(err)
	}
	early := holdLock(t, b, `SELECT registry_take_ticket()`) // 2^31 - 1
	done := applyBehind(s, ctx, node("l0", 2000, gib))       // 2^31, key 0
	pid := waitingWriter(t, ctx, conn, done, "Lock")
	if n := ticketLocks(t, ctx, conn, pid, "ExclusiveLock", 1<<31); n != 1 {
		t.Fatalf("the writer does not hold ticket 2^31")
	}
	waitShareLock(t, ctx, conn, pid, 1<<31-1)
	if _, err := early.Exec(ctx, `INSERT INTO cluster_node (cluster_id, name, resource_version) VALUES ('early', 'e0', registry_next_rv())`); err != nil {
		t.Fatal(err)
	}
	if err := early.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	waitFinished(t, done, 10*time.Second)
	assertTicketOrder(t, s, ctx, conn, start)
}
