package postgres

import (
	"context"
	"os"
	"testing"
	"time"
)

// NewInstance starts a server of the test's own (Start with opts), stopped
// when the test ends, for tests that do to a server what the shared one
// must not suffer: stop, crash, replicate, TLS, pg_hba.conf rules. With
// TEST_DATABASE_URL set the test is skipped: that mode uses an existing
// server and starts none.
func NewInstance(t testing.TB, opts Options) *Instance {
	t.Helper()
	if os.Getenv(EnvDatabaseURL) != "" {
		t.Skip(EnvDatabaseURL + " set; this test starts its own PostgreSQL servers")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	inst, err := Start(ctx, opts)
	if err != nil {
		t.Fatalf("start PostgreSQL: %v", err)
	}
	t.Cleanup(func() {
		if err := inst.Stop(); err != nil {
			t.Errorf("stop PostgreSQL: %v", err)
		}
	})
	return inst
}

// NewStandby starts a streaming standby of primary (StartStandby), stopped
// when the test ends (before a primary from NewInstance in the same test).
func NewStandby(t testing.TB, primary *Instance, opts StandbyOptions) *Standby {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := primary.StartStandby(ctx, opts)
	if err != nil {
		t.Fatalf("start PostgreSQL standby: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Stop(); err != nil {
			t.Errorf("stop PostgreSQL standby: %v", err)
		}
	})
	return s
}
