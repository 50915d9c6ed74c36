package postgres

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/example/platform-apiserver/pkg/apis/platform"
	"github.com/example/platform-apiserver/pkg/registry"
	"github.com/example/platform-apiserver/pkg/registry/store"
	pgtest "github.com/example/platform-apiserver/test/framework/postgres"
)

// TestReadsPoolBusy: when slow readers hold every read connection, a list
// and a get are answered busy (429 with Retry-After) within the acquire
// timeout instead of queueing, and the change feed, readiness and
// discovery's writes still get connections of their own.
func TestReadsPoolBusy(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dsn := withParam(pgtest.NewTestDatabase(t), "pool_max_conns", "2")
	s := openStore(t, dsn, Options{AcquireTimeout: 300 * time.Millisecond})
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	var held []*pgxpool.Conn
	for range 2 {
		c, err := s.reads.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
	}

	start := time.Now()
	_, err := s.NodeCapacities().List(ctx, store.ListOptions{})
	if waited := time.Since(start); waited > 5*time.Second {
		t.Errorf("the list waited %s for a connection; the acquire timeout is 300ms", waited)
	}
	busy, ok := errors.AsType[*store.BusyError](err)
	if !ok || !errors.Is(err, store.ErrBusy) {
		t.Fatalf("list with every read connection held: %v, want a BusyError", err)
	}
	if busy.RetryAfterSeconds < 1 {
		t.Errorf("Retry-After %d s, want at least 1", busy.RetryAfterSeconds)
	}
	status, ok := registry.APIError(err, platform.Resource("nodecapacities"), "").(apierrors.APIStatus)
	if !ok || status.Status().Code != http.StatusTooManyRequests || status.Status().Details == nil || status.Status().Details.RetryAfterSeconds < 1 {
		t.Errorf("APIError(%v) = %v, want 429 with Retry-After", err, status)
	}
	if _, err := s.GetNodeCapacity(ctx, "c1", "n1"); !errors.Is(err, store.ErrBusy) {
		t.Errorf("get with every read connection held: %v, want busy", err)
	}

	// The other kinds of work are not starved.
	if _, _, err := s.Changes(ctx, store.ChangeFilter{}, 0, 10); err != nil {
		t.Errorf("the change feed cannot read while API reads hold their pool: %v", err)
	}
	if err := s.Ready(ctx); err != nil {
		t.Errorf("readiness fails while API reads hold their pool: %v", err)
	}
	if _, err := s.ClaimMember(ctx, "c1", "replica-a"); err != nil {
		t.Errorf("discovery cannot claim a member while API reads hold their pool: %v", err)
	}
	if got := s.reads.Busy(); got != 2 {
		t.Errorf("busy acquires counted %d, want 2", got)
	}

	for _, c := range held {
		c.Release()
	}
	if _, err := s.NodeCapacities().List(ctx, store.ListOptions{}); err != nil {
		t.Errorf("list after the readers let go: %v", err)
	}
}

// TestCutAllInterruptsStatements: cutting a pool's connections fails a
// statement in flight at once (on a hung server it would wait for its
// deadline) and the pool's next read gets a new connection.
func TestCutAllInterruptsStatements(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := openStore(t, pgtest.NewTestDatabase(t), Options{})
	var before int32
	if err := s.reads.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&before); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := s.reads.Exec(ctx, `SELECT pg_sleep(60)`)
		done <- err
	}()
	// Until the server runs the sleep.
	err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		var running bool
		err := s.writes.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity
			WHERE datname = current_database() AND state = 'active' AND query = 'SELECT pg_sleep(60)')`).Scan(&running)
		return running, err
	})
	if err != nil {
		t.Fatalf("the sleep did not start: %v", err)
	}
	start := time.Now()
	s.reads.CutAll()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("a statement whose connection was cut succeeded")
		}
		t.Logf("cut after %s: %v", time.Since(start).Round(time.Millisecond), err)
	case <-time.After(10 * time.Second):
		t.Fatal("a statement whose connection was cut still ran 10 s later")
	}
	var after int32
	if err := s.reads.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&after); err != nil {
		t.Fatalf("a read after the cut: %v", err)
	}
	if after == before {
		t.Errorf("the read after the cut reused backend %d", before)
	}
}

// TestCutAllSparesMigrations: a spared connection (a migration's) is not
// cut; the others are.
func TestCutAllSparesMigrations(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := openStore(t, pgtest.NewTestDatabase(t), Options{})
	spared, err := s.writes.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer spared.Release()
	other, err := s.writes.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Release()
	done := s.writes.Spare(spared.Conn().PgConn())
	s.writes.CutAll()
	if _, err := spared.Exec(ctx, `SELECT 1`); err != nil {
		t.Errorf("the spared connection was cut: %v", err)
	}
	if _, err := other.Exec(ctx, `SELECT 1`); err == nil {
		t.Error("a connection not spared survived the cut")
	}
	done()
	s.writes.CutAll()
	if _, err := spared.Exec(ctx, `SELECT 1`); err == nil {
		t.Error("a connection no longer spared survived the cut")
	}
}
