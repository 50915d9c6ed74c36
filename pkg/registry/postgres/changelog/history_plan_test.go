package changelog_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/example/platform-apiserver/pkg/registry/postgres"
	"github.com/example/platform-apiserver/pkg/registry/postgres/changelog"
	"github.com/example/platform-apiserver/pkg/registry/postgres/internal/pgtesting"
	"github.com/example/platform-apiserver/pkg/registry/postgres/views"
	"github.com/example/platform-apiserver/pkg/registry/store"
	pgtest "github.com/example/platform-apiserver/test/framework/postgres"
)

// TestHistoryReadOfAMemberReadsItsEntriesOnly: a watch's history read
// filtered by member reads the change-log entries of that member and kind,
// on the (kind, member) index (migration 029), whatever else the log holds:
// a member with 3 entries among 3,000 of another touches a handful of
// entries, a member the log does not hold touches none, in the plan
// PostgreSQL makes for the values. The read of a kind without a member
// walks the log from its version, which the same count shows (the
// control). A generic plan, made without the values, walks the log for a
// member too: so the store has its member reads planned for their values,
// and does so after more runs than PostgreSQL's five custom plans (the
// index statistics, read last).
func TestHistoryReadOfAMemberReadsItsEntriesOnly(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dsn := pgtest.NewTestDatabase(t)
	s, err := postgres.Open(ctx, dsn, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3000; i += 500 {
		var nodes []store.Node
		for j := i; j < i+500; j++ {
			nodes = append(nodes, pgtesting.Node(fmt.Sprintf("n%04d", j), 4000, 8<<30))
		}
		if err := s.Apply(ctx, store.Batch{ClusterID: "big", Nodes: nodes}); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"a", "b", "c"} {
		if err := s.Apply(ctx, store.Batch{ClusterID: "small", Nodes: []store.Node{pgtesting.Node(name, 1000, 1<<30)}}); err != nil {
			t.Fatal(err)
		}
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	if _, err := conn.Exec(ctx, `ANALYZE registry_change`); err != nil {
		t.Fatal(err)
	}
	memberChanges := changelog.New(views.InChangeLog()...).MemberChangesSQL(0) // NodeCapacity's
	const kind = string(store.KindNodeCapacity)
	for _, c := range []struct {
		name, types, sql string
		args             []any
		most, least      int
	}{
		{"window of a small member", "bigint, int, text, text", changelog.MemberWindowSQL, []any{0, 1000, kind, "small"}, 10, 3},
		{"window of an unknown member", "bigint, int, text, text", changelog.MemberWindowSQL, []any{0, 1000, kind, "nowhere"}, 0, 0},
		{"entries of a small member", "bigint, bigint, text, text", memberChanges, []any{0, 1 << 40, kind, "small"}, 40, 3},
		{"entries of an unknown member", "bigint, bigint, text, text", memberChanges, []any{0, 1 << 40, kind, "nowhere"}, 0, 0},
		{"window of a kind (control)", "bigint, int, text", changelog.HistoryWindowSQL, []any{0, 5000, kind}, 1 << 30, 3000},
	} {
		touched := entriesTouched(t, conn, "force_custom_plan", c.types, c.sql, c.args)
		if touched > c.most || touched < c.least {
			t.Errorf("%s: touched %d change-log entries, want %d to %d", c.name, touched, c.least, c.most)
		}
	}
	if touched := entriesTouched(t, conn, "force_generic_plan", "bigint, int, text, text", changelog.MemberWindowSQL, []any{0, 1000, kind, "nowhere"}); touched < 3000 {
		t.Logf("the generic plan of a member's window touched %d entries: planning for the values may no longer be needed", touched)
	}

	// The store's own reads, ten of each, on its pooled connections. This
	// session's reads above are counted first.
	if _, err := conn.Exec(ctx, `SELECT pg_stat_force_next_flush()`); err != nil {
		t.Fatal(err)
	}
	before := indexReads(t, conn)
	for range 10 {
		for _, member := range []string{"small", "nowhere"} {
			if _, _, err := s.Changes(ctx, store.ChangeFilter{Kind: store.KindNodeCapacity, ClusterID: member}, 0, 1000); err != nil {
				t.Fatal(err)
			}
		}
	}
	// A backend reports its reads within a second or so of going idle.
	var after map[string]int64
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(500 * time.Millisecond) {
		after = indexReads(t, conn)
		if after[memberIndex] > before[memberIndex] || time.Now().After(deadline) {
			break
		}
	}
	time.Sleep(2 * time.Second) // the last backends' reports
	after = indexReads(t, conn)
	if after[memberIndex] == before[memberIndex] {
		t.Fatalf("the store's 20 member reads read nothing on %s: %v", memberIndex, after)
	}
	if walked := after["registry_change_pkey"] - before["registry_change_pkey"]; walked > 1000 {
		t.Errorf("the store's 20 member reads read %d entries on the primary key: a walk of the log (3,030 entries a read)", walked)
	}
}

const memberIndex = "registry_change_kind_cluster_idx"

// indexReads returns the index entries read so far, by index of
// registry_change, as the statistics tell.
func indexReads(t *testing.T, conn *pgx.Conn) map[string]int64 {
	t.Helper()
	rows, err := conn.Query(t.Context(), `SELECT indexrelname, idx_tup_read FROM pg_stat_user_indexes WHERE relname = 'registry_change'`)
	if err != nil {
		t.Fatal(err)
	}
	reads, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (struct {
		name string
		n    int64
	}, error) {
		var v struct {
			name string
			n    int64
		}
		err := r.Scan(&v.name, &v.n)
		return v, err
	})
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]int64{}
	for _, r := range reads {
		m[r.name] = r.n
	}
	return m
}

// entriesTouched runs sql as a prepared statement under plan_cache_mode
// mode with EXPLAIN ANALYZE and returns the rows its scans of
// registry_change returned or filtered out, over all their loops.
func entriesTouched(t *testing.T, conn *pgx.Conn, mode, types, sql string, args []any) int {
	t.Helper()
	ctx := t.Context()
	if _, err := conn.Exec(ctx, "SET plan_cache_mode = "+mode); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "PREPARE history("+types+") AS "+sql); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if _, err := conn.Exec(context.WithoutCancel(ctx), "DEALLOCATE history"); err != nil {
			t.Error(err)
		}
	}()
	// EXECUTE takes its values as literals.
	values := make([]string, len(args))
	for i, a := range args {
		if str, ok := a.(string); ok {
			values[i] = "'" + strings.ReplaceAll(str, "'", "''") + "'"
		} else {
			values[i] = fmt.Sprint(a)
		}
	}
	var out []byte
	if err := conn.QueryRow(ctx, "EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE history("+strings.Join(values, ", ")+")").Scan(&out); err != nil {
		t.Fatal(err)
	}
	var plans []struct{ Plan planNode }
	if err := json.Unmarshal(out, &plans); err != nil || len(plans) != 1 {
		t.Fatalf("plan %s: %v", out, err)
	}
	return plans[0].Plan.touched()
}

type planNode struct {
	Relation string     `json:"Relation Name"`
	Rows     float64    `json:"Actual Rows"`
	Loops    float64    `json:"Actual Loops"`
	Removed  float64    `json:"Rows Removed by Filter"`
	Rechecks float64    `json:"Rows Removed by Index Recheck"`
	Plans    []planNode `json:"Plans"`
}

func (n planNode) touched() int {
	total := 0
	if n.Relation == "registry_change" {
		total = int((n.Rows + n.Removed + n.Rechecks) * n.Loops)
	}
	for _, c := range n.Plans {
		total += c.touched()
	}
	return total
}
