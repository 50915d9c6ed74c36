package changelog_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/example/platform-apiserver/pkg/registry/postgres"
	"github.com/example/platform-apiserver/pkg/registry/postgres/internal/pgtesting"
	"github.com/example/platform-apiserver/pkg/registry/postgres/internal/registrytest"
	"github.com/example/platform-apiserver/pkg/registry/store"
)

func TestNotifications(t *testing.T) {
	t.Parallel()
	s, b := registrytest.Setup(t, postgres.Options{})
	ctx, cancel := context.WithCancel(b.Ctx)
	defer cancel()
	notes, err := s.Notifications(ctx)
	if err != nil {
		t.Fatal(err)
	}

	expectNone(t, notes, "idle")
	batch := store.Batch{ClusterID: "c", Nodes: []store.Node{pgtesting.Node("n1", 1000, 1)}}
	registrytest.MustApply(t, s, ctx, batch)
	expectOne(t, notes, "after a commit")
	registrytest.MustApply(t, s, ctx, batch)
	expectNone(t, notes, "after a no-op commit")

	// Commits coalesce into one pending value.
	for i := range 3 {
		registrytest.MustApply(t, s, ctx, store.Batch{ClusterID: "c", Nodes: []store.Node{registrytest.WithLabel(pgtesting.Node("n1", 1000, 1), "i", string(rune('a'+i)))}})
	}
	expectOne(t, notes, "after three commits")
	// The channel closes when ctx ends.
	cancel()
	expectClosed(t, notes)

	// A dropped connection is re-established; the reconnect itself
	// signals. A new listener, so no value of the commits above is pending.
	ctx, cancel = context.WithCancel(b.Ctx)
	defer cancel()
	admin, err := pgx.Connect(ctx, b.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.Background())
	listeners := func() (count int, pid int32) {
		err := admin.QueryRow(ctx, `SELECT count(*), coalesce(max(pid), 0) FROM pg_stat_activity
			WHERE datname = current_database() AND application_name = 'platform-apiserver-listen'`).Scan(&count, &pid)
		if err != nil {
			t.Fatal(err)
		}
		return count, pid
	}
	if notes, err = s.Notifications(ctx); err != nil {
		t.Fatal(err)
	}
	var old int32
	registrytest.Poll(t, "the first listener gone, the second listening", func() bool {
		n, pid := listeners()
		old = pid
		return n == 1
	})
	if _, err := admin.Exec(ctx, `SELECT pg_terminate_backend($1)`, old); err != nil {
		t.Fatal(err)
	}
	expectOne(t, notes, "after reconnecting")
	registrytest.Poll(t, "the listener reconnected", func() bool {
		n, pid := listeners()
		return n == 1 && pid != old
	})
	registrytest.MustApply(t, s, ctx, store.Batch{ClusterID: "c", Deleted: store.Keys{store.ResourceNodes: {{Name: "n1"}}}})
	expectOne(t, notes, "after a commit following the reconnect")

	cancel()
	expectClosed(t, notes)
}

// expectNone checks that no notification arrives within a window.
func expectNone(t *testing.T, notes <-chan struct{}, step string) {
	t.Helper()
	select {
	case <-notes:
		t.Fatalf("%s: unexpected notification", step)
	case <-time.After(200 * time.Millisecond):
	}
}

func expectOne(t *testing.T, notes <-chan struct{}, step string) {
	t.Helper()
	select {
	case _, ok := <-notes:
		if !ok {
			t.Fatalf("%s: channel closed", step)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: no notification", step)
	}
}

// expectClosed drains notes until it closes.
func expectClosed(t *testing.T, notes <-chan struct{}) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case _, ok := <-notes:
			if !ok {
				return
			}
		case <-timeout:
			t.Fatal("channel not closed after ctx ended")
		}
	}
}
