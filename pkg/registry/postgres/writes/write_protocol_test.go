package writes_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/example/platform-apiserver/pkg/registry/postgres"
	"github.com/example/platform-apiserver/pkg/registry/postgres/schema"
	"github.com/example/platform-apiserver/pkg/registry/store"
)

// TestOlderWriteProtocolIsRefused: a publish is checked against the least
// write protocol the registry accepts (migration 028) in its own
// transaction. At 0, a session that says no protocol (a release from
// before the check) publishes as before; once a migration raises it past
// this release's, every publish of this release fails with an error naming
// both, nothing of it commits, and readiness fails saying the replica
// cannot write its members; lowered again, writes go on.
func TestOlderWriteProtocolIsRefused(t *testing.T) {
	t.Parallel()
	s, b := setup(t, postgres.Options{})
	ctx := b.Ctx
	mustApply(t, s, ctx, store.Batch{ClusterID: "m", Nodes: []store.Node{node("n0", 1000, gib)}})
	old := b.Connect(t) // says no protocol, as a release before migration 028
	publish := func() error {
		tx, err := old.Begin(ctx)
		if err != nil {
			return err
		}
		defer func() { _ = tx.Rollback(ctx) }()
		if _, err := tx.Exec(ctx, `INSERT INTO cluster_node (cluster_id, name, resource_version) VALUES ('old', 'o0', registry_next_rv())
			ON CONFLICT (cluster_id, name) DO UPDATE SET resource_version = EXCLUDED.resource_version`); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `SELECT registry_wait_tickets(0)`); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE registry_state SET resource_version = greatest(resource_version, current_setting('registry.next_rv')::bigint - 1)`); err != nil {
			return err
		}
		return tx.Commit(ctx)
	}
	if err := publish(); err != nil {
		t.Fatalf("a publish of a release before the check, at protocol 0: %v", err)
	}
	setRequired := func(p int) {
		t.Helper()
		if _, err := old.Exec(ctx, `SET registry.write_protocol = 99`); err != nil {
			t.Fatal(err)
		}
		if _, err := old.Exec(ctx, `UPDATE registry_state SET write_protocol = $1`, p); err != nil {
			t.Fatal(err)
		}
		if _, err := old.Exec(ctx, `RESET registry.write_protocol`); err != nil {
			t.Fatal(err)
		}
	}

	setRequired(schema.WriteProtocol + 1)
	before := registryRV(t, s, ctx)
	err := s.Apply(ctx, store.Batch{ClusterID: "m", Nodes: []store.Node{node("n0", 2000, gib)}})
	if !errors.Is(err, store.ErrUnavailable) || !strings.Contains(err.Error(), "this replica writes registry protocol 1, the registry requires 2 or later") {
		t.Errorf("a publish below the registry's protocol: %v; want unavailable, naming both protocols", err)
	}
	if n := getNode(t, s, ctx, "m", "n0"); n.Node.Capacity.CPUMillis != 1000 || registryRV(t, s, ctx) != before {
		t.Errorf("the refused write committed: n0 %dm, registry %d → %d", n.Node.Capacity.CPUMillis, before, registryRV(t, s, ctx))
	}
	if err := publish(); err == nil || !strings.Contains(err.Error(), "writes registry protocol 0") {
		t.Errorf("a publish of a release before the check: %v; want refused", err)
	}
	if err := s.Ready(ctx); !errors.Is(err, store.ErrUnavailable) ||
		!strings.Contains(err.Error(), "requires write protocol 2 or later and this replica writes 1: it cannot write its members") {
		t.Errorf("readiness: %v; want failing, naming both protocols", err)
	}

	setRequired(schema.WriteProtocol)
	mustApply(t, s, ctx, store.Batch{ClusterID: "m", Nodes: []store.Node{node("n0", 2000, gib)}})
	if err := s.Ready(ctx); err != nil {
		t.Errorf("readiness at this release's protocol: %v", err)
	}
}
