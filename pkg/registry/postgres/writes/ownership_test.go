package writes_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/example/platform-apiserver/pkg/registry/postgres"
	"github.com/example/platform-apiserver/pkg/registry/postgres/writes"
	"github.com/example/platform-apiserver/pkg/registry/store"
)

// TestFencedWrites: a claim gives a member a new epoch; writes carrying an
// older one fail with ErrFenced and change nothing, whatever they write;
// removing the member fences out its owner too and refuses claims until it
// is listed anew, and a later claim never reuses an epoch.
func TestFencedWrites(t *testing.T) {
	t.Parallel()
	s, b := setup(t, postgres.Options{})
	ctx := b.Ctx
	first, err := s.ClaimMember(ctx, "m", "replica-a")
	if err != nil || first.Epoch == 0 || first.ClusterID != "m" {
		t.Fatalf("ClaimMember = %+v, %v; want a non-zero epoch of m", first, err)
	}
	mustApply(t, s, ctx, store.Batch{ClusterID: "m", Epoch: first.Epoch, Nodes: []store.Node{node("n1", 4000, 8<<30)}})
	if err := s.Apply(ctx, store.Batch{ClusterID: "m", Nodes: []store.Node{node("unfenced", 4000, 8<<30)}}); !errors.Is(err, store.ErrFenced) {
		t.Errorf("Apply at epoch 0 of a claimed member: %v; want ErrFenced", err)
	}

	second, err := s.ClaimMember(ctx, "m", "replica-b")
	if err != nil || second.Epoch <= first.Epoch {
		t.Fatalf("second ClaimMember = %+v, %v; want an epoch above %d", second, err, first.Epoch)
	}
	stale := []struct {
		name  string
		write func() error
	}{
		{"apply", func() error {
			return s.Apply(ctx, store.Batch{ClusterID: "m", Epoch: first.Epoch, Nodes: []store.Node{node("ghost", 4000, 8<<30)},
				Cursors: map[store.Resource]string{store.ResourceNodes: "999"}})
		}},
		{"report usage", func() error {
			_, err := s.RecordNodeMetrics(ctx, first, []store.NodeMetricsSample{{ClusterID: "m", Node: "n1", CPUNanoCores: 1e9,
				MemoryBytes: 1 << 30, ObservedAt: time.Now().Add(-time.Minute), Window: 30 * time.Second}}, store.UsageReporting{Period: time.Minute})
			return err
		}},
		{"identity", func() error {
			_, err := s.CheckMemberIdentity(ctx, first, "uid-x")
			return err
		}},
	}
	for _, w := range stale {
		if err := w.write(); !errors.Is(err, store.ErrFenced) {
			t.Errorf("%s with the replaced epoch: %v; want ErrFenced", w.name, err)
		}
	}
	if _, err := s.GetNodeCapacity(ctx, "m", "ghost"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a fenced batch's node: %v; want not found", err)
	}
	if got, _ := s.Cursor(ctx, "m", store.ResourceNodes); got != "" {
		t.Errorf("a fenced batch's cursor %q landed", got)
	}
	if n, err := s.GetNodeCapacity(ctx, "m", "n1"); err != nil || n.Usage != nil {
		t.Errorf("node after a fenced usage report: %+v, %v; want no usage", n, err)
	}
	mustApply(t, s, ctx, store.Batch{ClusterID: "m", Epoch: second.Epoch, Nodes: []store.Node{node("n2", 4000, 8<<30)}})

	removeMember(t, s, ctx, "m")
	if err := s.Apply(ctx, store.Batch{ClusterID: "m", Epoch: second.Epoch, Nodes: []store.Node{node("n3", 4000, 8<<30)}}); !errors.Is(err, store.ErrFenced) {
		t.Errorf("Apply of the owner of a removed member: %v; want ErrFenced", err)
	}
	if _, err := s.ClaimMember(ctx, "m", "replica-a"); !errors.Is(err, store.ErrMemberRemoved) {
		t.Errorf("claim of a removed member: %v; want ErrMemberRemoved", err)
	}
	relist(t, s, ctx, "m")
	third, err := s.ClaimMember(ctx, "m", "replica-a")
	if err != nil || third.Epoch <= second.Epoch {
		t.Errorf("claim after the member was listed anew = %+v, %v; want an epoch above %d (never reused)", third, err, second.Epoch)
	}
}

// TestClaimWaitsForWriteInFlight: a claim is ordered after a write of the
// member that holds its lock, so the write's owner either committed before
// the claim or is fenced.
func TestClaimWaitsForWriteInFlight(t *testing.T) {
	t.Parallel()
	s, b := setup(t, postgres.Options{})
	ctx := b.Ctx
	tx := holdMemberLock(t, b, "m")
	claimed := make(chan error, 1)
	go func() {
		_, err := s.ClaimMember(ctx, "m", "replica-b")
		claimed <- err
	}()
	select {
	case err := <-claimed:
		t.Fatalf("claim finished (%v) while a write of the member was in flight", err)
	case <-time.After(300 * time.Millisecond):
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-claimed; err != nil {
		t.Fatalf("claim after the write committed: %v", err)
	}
}

// TestWritersOfDifferentMembersRunConcurrently: while one member's write is
// stuck in its per-member section (here: waiting for a pod row another
// transaction holds), a write of another member, view rows included,
// commits; a commit ticket is only taken for the views section.
func TestWritersOfDifferentMembersRunConcurrently(t *testing.T) {
	t.Parallel()
	s, b := setup(t, postgres.Options{})
	ctx := b.Ctx
	mustApply(t, s, ctx, store.Batch{ClusterID: "a", Pods: []store.Pod{pod("ns", "p", "n1", 100, 1<<20)}})

	conn, err := pgx.Connect(ctx, b.DSN)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	blocker, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := blocker.Exec(ctx, `SELECT 1 FROM cluster_pod WHERE cluster_id = 'a' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	stuck := make(chan error, 1)
	go func() {
		stuck <- s.Apply(ctx, store.Batch{ClusterID: "a", Nodes: []store.Node{node("n1", 4000, 8<<30)},
			Pods: []store.Pod{pod("ns", "p", "n1", 200, 1<<20)}})
	}()
	waitForLockWait(t, ctx, conn)

	other, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := s.Apply(other, store.Batch{ClusterID: "b", Nodes: []store.Node{node("n1", 4000, 8<<30)},
		Pods: []store.Pod{pod("ns", "p", "n1", 100, 1<<20)}}); err != nil {
		t.Fatalf("a write of member b while a's write is in its member section: %v", err)
	}
	if err := blocker.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-stuck; err != nil {
		t.Fatalf("member a's write: %v", err)
	}
	n, err := s.GetNodeCapacity(ctx, "a", "n1")
	if err != nil || n.Requested.CPUMillis != 200 {
		t.Errorf("member a's node after its write: %+v, %v; want 200m requested", n, err)
	}
}

// TestMaintenanceTakesTurns: within the interval, only the first caller
// runs a round.
func TestMaintenanceTakesTurns(t *testing.T) {
	t.Parallel()
	s, b := setup(t, postgres.Options{})
	m := store.MetricsMaintenance{Now: time.Now(), RetainAfter: time.Now().Add(-24 * time.Hour), UnknownBefore: time.Now().Add(-time.Hour), Interval: time.Hour}
	first, err := s.MaintainNodeMetrics(b.Ctx, m)
	if err != nil || first.Skipped {
		t.Fatalf("first round: %+v, %v; want it run", first, err)
	}
	second, err := s.MaintainNodeMetrics(b.Ctx, m)
	if err != nil || !second.Skipped {
		t.Errorf("second round within the interval: %+v, %v; want it skipped", second, err)
	}
	m.Interval = 0
	if third, err := s.MaintainNodeMetrics(b.Ctx, m); err != nil || third.Skipped {
		t.Errorf("round with a zero interval: %+v, %v; want it run", third, err)
	}
}

// holdMemberLock opens a transaction that holds member id's write lock, as
// a write in flight does, until the test commits or ends it.
func holdMemberLock(t *testing.T, b testBundle, id string) pgx.Tx {
	t.Helper()
	return holdLock(t, b, `SELECT pg_advisory_xact_lock($1, hashtext($2))`, writes.MemberLockClass, id)
}

// holdLock opens a transaction on a connection of its own that takes a
// lock with sql, until the test commits or ends it.
func holdLock(t *testing.T, b testBundle, sql string, args ...any) pgx.Tx {
	t.Helper()
	tx, err := b.Connect(t).Begin(b.Ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(b.Ctx, sql, args...); err != nil {
		t.Fatal(err)
	}
	return tx
}

// waitForLockWait waits until some session of the database waits for a lock.
func waitForLockWait(t *testing.T, ctx context.Context, conn *pgx.Conn) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		var waiting bool
		if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock')`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("no write started waiting for the held lock")
}
