package replicas_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/example/platform-apiserver/pkg/registry/postgres"
	"github.com/example/platform-apiserver/pkg/registry/store"
	pgtest "github.com/example/platform-apiserver/test/framework/postgres"
)

// changedNodes names the nodes of the changes after rv.
func changedNodes(t *testing.T, s *postgres.Store, ctx context.Context, after int64) []string {
	t.Helper()
	changes, _, err := s.Changes(ctx, store.ChangeFilter{}, after, 100)
	if err != nil {
		t.Fatalf("changes after %d: %v", after, err)
	}
	var names []string
	for _, c := range changes {
		if asNode(c.Object) != nil {
			names = append(names, asNode(c.Object).Node.Name)
		}
	}
	return names
}

// standbyReplay pauses or resumes WAL replay on a standby: it keeps
// answering queries, with what it had replayed.
func standbyReplay(t *testing.T, ctx context.Context, sb *pgtest.Standby, pause bool) {
	t.Helper()
	conn, err := pgx.Connect(ctx, sb.DSN())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	fn := "pg_wal_replay_resume()"
	if pause {
		fn = "pg_wal_replay_pause()"
	}
	if _, err := conn.Exec(ctx, "SELECT "+fn); err != nil {
		t.Fatal(err)
	}
}

// TestStandbyChangeFeed: the change feed reads from a standby once it holds
// every change the process was notified of, and from the primary while it
// does not, so the follower never misses or delays a notified change; a
// standby that stops replaying, or stops, fails CheckStandbys with a
// message that says which and how far behind, and passes again once it
// caught up.
func TestStandbyChangeFeed(t *testing.T) {
	primary := pgtest.NewInstance(t, pgtest.Options{})
	standby := pgtest.NewStandby(t, primary, pgtest.StandbyOptions{})
	s, ctx := haStore(t, primary.DSN(), postgres.Options{ReadDSNs: []string{standby.DSN()}, NoPrimaryReads: true, StandbyMaxLag: time.Second})
	notes, err := s.Notifications(ctx)
	if err != nil {
		t.Fatal(err)
	}
	writeNotified := func(name string) int64 {
		t.Helper()
		before := presentRV(t, s, ctx)
		mustApply(t, s, ctx, store.Batch{ClusterID: "c1", Nodes: []store.Node{node(name, 1000, 1<<30)}})
		select {
		case <-notes:
		case <-time.After(30 * time.Second):
			t.Fatalf("no notification for %s", name)
		}
		return before
	}
	if err := standby.CatchUp(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.CheckStandbys(ctx); err != nil {
		t.Errorf("streaming standby: %v", err)
	}

	before := writeNotified("a")
	if got := changedNodes(t, s, ctx, before); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("changes after %d: %v, want [a]", before, got)
	}

	standbyReplay(t, ctx, standby, true)
	before = writeNotified("b")
	if got := changedNodes(t, s, ctx, before); !slices.Equal(got, []string{"b"}) {
		t.Fatalf("standby not replaying: changes after %d: %v, want [b] (from the primary)", before, got)
	}
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		return s.CheckStandbys(ctx) != nil, nil
	})
	if err != nil {
		t.Fatal("CheckStandbys passes while the standby replays nothing and is more than its limit behind")
	}
	if err := s.CheckStandbys(ctx); err == nil || !strings.Contains(err.Error(), "behind the primary (limit 1s") {
		t.Errorf("CheckStandbys of a standby not replaying: %v, want it to say how far behind and the limit", err)
	}

	standbyReplay(t, ctx, standby, false)
	if err := standby.CatchUp(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.CheckStandbys(ctx); err != nil {
		t.Errorf("standby caught up: %v", err)
	}
	// With the primary down, the caught-up standby serves the feed.
	if err := primary.Pause(); err != nil {
		t.Fatal(err)
	}
	if got := changedNodes(t, s, ctx, before); !slices.Equal(got, []string{"b"}) {
		t.Fatalf("primary down: changes after %d from the standby: %v, want [b]", before, got)
	}
	if err := primary.Resume(ctx); err != nil {
		t.Fatal(err)
	}

	if err := standby.Pause(); err != nil {
		t.Fatal(err)
	}
	if err := s.CheckStandbys(ctx); err == nil || !strings.Contains(err.Error(), "cannot be asked") {
		t.Errorf("CheckStandbys with the standby down: %v, want it to say the standby cannot be asked", err)
	}
	before = writeNotified("c")
	if got := changedNodes(t, s, ctx, before); !slices.Equal(got, []string{"c"}) {
		t.Errorf("standby down: changes after %d: %v, want [c] (from the primary)", before, got)
	}
}

// TestStandbyOnTheOldTimelineServesNothing: a standby that replayed
// changes a failover lost (it followed the old primary further than the
// promoted one) is never read from, even by a process that starts after
// the failover and has seen nothing yet: reads need the new timeline's floor.
func TestStandbyOnTheOldTimelineServesNothing(t *testing.T) {
	primary := pgtest.NewInstance(t, pgtest.Options{})
	promoted := pgtest.NewStandby(t, primary, pgtest.StandbyOptions{})
	stale := pgtest.NewStandby(t, primary, pgtest.StandbyOptions{})
	s, ctx := haStore(t, primary.DSN(), postgres.Options{})

	mustApply(t, s, ctx, store.Batch{ClusterID: "c1", Nodes: []store.Node{node("kept", 1000, 1<<30)}})
	kept := presentRV(t, s, ctx)
	if err := promoted.CatchUp(ctx); err != nil {
		t.Fatal(err)
	}
	if err := promoted.Pause(); err != nil {
		t.Fatal(err)
	}
	mustApply(t, s, ctx, store.Batch{ClusterID: "c1", Nodes: []store.Node{node("lost", 1000, 1<<30)}})
	if err := stale.CatchUp(ctx); err != nil {
		t.Fatal(err)
	}
	if err := promoted.FailOverPaused(ctx); err != nil {
		t.Fatal(err)
	}

	after, ctx := haStore(t, promoted.DSN(), postgres.Options{ReadDSNs: []string{stale.DSN()}, NoPrimaryReads: true})
	page, err := after.NodeCapacities().List(ctx, store.ListOptions{Freshness: store.Freshness{AtLeast: kept}})
	if err != nil {
		t.Fatal(err)
	}
	for _, nc := range page.Items {
		if nc.Node.Name == "lost" {
			t.Fatalf("a list after the failover at %d returned the lost node from the stale standby (list at %d)", kept, page.ResourceVersion)
		}
	}
	if got := changedNodes(t, after, ctx, kept); len(got) != 0 {
		t.Errorf("changes after %d following the failover: %v, want none (the lost change is not in the registry)", kept, got)
	}
}
