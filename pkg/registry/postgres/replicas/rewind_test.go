package replicas_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/example/platform-apiserver/pkg/registry/postgres"
	"github.com/example/platform-apiserver/pkg/registry/store"
	pgtest "github.com/example/platform-apiserver/test/framework/postgres"
)

// TestRegistryGoneBackIsRecordedAsAFailover: the registry goes back below a
// version a replica read (what a restore from a backup taken earlier, or a
// crash that lost acknowledged commits, leaves on the same timeline: the
// present, the change log and the ticket sequence as they were). The
// replica's next read of the change feed fails as compacted (its
// follower drops its watchers, who resume and get 410), records it once as
// a failover, and every version handed out after it is past any one read
// before, so none is handed out twice.
func TestRegistryGoneBackIsRecordedAsAFailover(t *testing.T) {
	t.Parallel()
	dsn := pgtest.NewTestDatabase(t)
	s, ctx := haStore(t, dsn, postgres.Options{})
	mustApply(t, s, ctx, store.Batch{ClusterID: "m", Nodes: []store.Node{node("n1", 1000, gib)}})
	_, backup, err := s.Changes(ctx, store.ChangeFilter{}, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	mustApply(t, s, ctx, store.Batch{ClusterID: "m", Nodes: []store.Node{node("n2", 1000, gib)}})
	_, read, err := s.Changes(ctx, store.ChangeFilter{}, backup, 100)
	if err != nil || read <= backup {
		t.Fatalf("changes after %d: read at %d, %v", backup, read, err)
	}

	// Restored to the backup: what it held then.
	conn := connect(t, ctx, dsn)
	for _, sql := range []string{
		`DELETE FROM registry_change WHERE resource_version > $1`,
		`UPDATE registry_state SET resource_version = $1`,
		`SELECT setval('registry_ticket', $1::bigint >> 22)`,
	} {
		if _, err := conn.Exec(ctx, sql, backup); err != nil {
			t.Fatal(err)
		}
	}
	other, err := postgres.Open(ctx, dsn, postgres.Options{}) // a replica that read nothing past the backup
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(other.Close)
	_, _, err = s.Changes(ctx, store.ChangeFilter{}, read, 100)
	if !errors.Is(err, store.ErrCompacted) || !strings.Contains(err.Error(), "went back") {
		t.Fatalf("the read after the registry went back: %v; want compacted, saying it went back", err)
	}
	var failovers, lostAfter, floor int64
	if err := conn.QueryRow(ctx, `SELECT failovers, lost_after, floor FROM registry_epoch`).Scan(&failovers, &lostAfter, &floor); err != nil {
		t.Fatal(err)
	}
	if failovers != 1 || lostAfter != backup || floor <= read {
		t.Errorf("recorded failovers %d, lost after %d, floor %d; want 1, %d, above %d", failovers, lostAfter, floor, backup, read)
	}
	if _, _, err := s.Changes(ctx, store.ChangeFilter{}, read, 100); !errors.Is(err, store.ErrCompacted) || !strings.Contains(err.Error(), "lost in a failover") {
		t.Errorf("a resume from a lost version: %v; want compacted (410)", err)
	}
	if _, at, err := other.Changes(ctx, store.ChangeFilter{}, backup, 100); err != nil || at < floor {
		t.Errorf("the other replica from the backup's version: read at %d, %v; want the floor %d", at, err, floor)
	}
	if err := conn.QueryRow(ctx, `SELECT failovers FROM registry_epoch`).Scan(&failovers); err != nil || failovers != 1 {
		t.Errorf("failovers %d, %v; want it recorded once", failovers, err)
	}
	mustApply(t, s, ctx, store.Batch{ClusterID: "m", Nodes: []store.Node{node("n3", 1000, gib)}})
	if n, err := s.GetNodeCapacity(ctx, "m", "n3"); err != nil {
		t.Fatal(err)
	} else if n.ResourceVersion <= read {
		t.Errorf("a version handed out after the registry went back: %d, not past %d read before", n.ResourceVersion, read)
	}
}
