package changelog

import (
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/example/platform-apiserver/pkg/registry/postgres/pgdb"
	pgtest "github.com/example/platform-apiserver/test/framework/postgres"
)

// TestSlowPrimaryIsNotCut: a read that ran out of time on a primary that
// still answers (a lock wait, a long query: slow, not hung) does not cut
// the primary's connections, so a discovery commit in flight goes on; the
// probe's new connection reaches the same server the pools are on.
func TestSlowPrimaryIsNotCut(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	cfg, err := pgxpool.ParseConfig(pgtest.NewTestDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	var pools []*pgdb.Pool
	for _, name := range []string{"writes", "feed"} {
		p, err := pgdb.NewPool(ctx, name, cfg, 2, 0)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Close)
		pools = append(pools, p)
	}
	writes, feed := pools[0], pools[1]
	l := NewListener(feed, pools, func(int64) {})
	inFlight, err := writes.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = inFlight.Rollback(ctx) }()
	if _, err := inFlight.Exec(ctx, `SELECT 1`); err != nil {
		t.Fatal(err)
	}
	if !l.primaryAnswers(ctx) {
		t.Fatal("the probe says a primary that answers does not")
	}
	l.Abandon(ctx)
	if _, err := inFlight.Exec(ctx, `SELECT 1`); err != nil {
		t.Errorf("a transaction in flight after a read timed out on a primary that answers: %v; want it not cut", err)
	}
	if err := inFlight.Commit(ctx); err != nil {
		t.Errorf("commit: %v", err)
	}
}
