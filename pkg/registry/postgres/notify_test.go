package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/example/platform-apiserver/pkg/registry/postgres"
	"github.com/example/platform-apiserver/pkg/registry/store"
)

func TestNotifications(t *testing.T) {
	t.Parallel()
	s, b := setup(t, postgres.Options{})
	ctx, cancel := context.WithCancel(b.ctx)
	defer cancel()
	notes, err := s.Notifications(ctx)
	if err != nil {
		t.Fatal(err)
	}
	expectNone := func(step string) {
		t.Helper()
		select {
		case <-notes:
			t.Fatalf("%s: unexpected notification", step)
		case <-time.After(200 * time.Millisecond):
		}
	}
	expectOne := func(step string) {
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

	expectNone("idle")
	batch := store.Batch{ClusterID: "c", Nodes: []store.Node{node("n1", 1000, 1)}}
	mustApply(t, s, ctx, batch)
	expectOne("after a commit")
	mustApply(t, s, ctx, batch)
	expectNone("after a no-op commit")

	// Commits coalesce into one pending value.
	for i := range 3 {
		mustApply(t, s, ctx, store.Batch{ClusterID: "c", Nodes: []store.Node{withLabel(node("n1", 1000, 1), "i", string(rune('a'+i)))}})
	}
	expectOne("after three commits")
	time.Sleep(100 * time.Millisecond)
	select {
	case <-notes:
	default:
	}

	// A dropped connection is re-established; the reconnect itself signals.
	admin, err := pgx.Connect(ctx, b.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.Background())
	listenerPID := func() int32 {
		var pid int32
		err := admin.QueryRow(ctx, `SELECT coalesce(max(pid), 0) FROM pg_stat_activity
			WHERE datname = current_database() AND application_name = 'platform-apiserver-listen'`).Scan(&pid)
		if err != nil {
			t.Fatal(err)
		}
		return pid
	}
	old := listenerPID()
	if old == 0 {
		t.Fatal("no listening session")
	}
	if _, err := admin.Exec(ctx, `SELECT pg_terminate_backend($1)`, old); err != nil {
		t.Fatal(err)
	}
	expectOne("after reconnecting")
	for deadline := time.Now().Add(10 * time.Second); ; {
		if pid := listenerPID(); pid != 0 && pid != old {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("listener did not reconnect")
		}
		time.Sleep(20 * time.Millisecond)
	}
	mustApply(t, s, ctx, store.Batch{ClusterID: "c", Deleted: store.Keys{store.ResourceNodes: {{Name: "n1"}}}})
	expectOne("after a commit following the reconnect")

	cancel()
	select {
	case _, ok := <-notes:
		for ok {
			_, ok = <-notes
		}
	case <-time.After(10 * time.Second):
		t.Fatal("channel not closed after ctx ended")
	}
}
