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
	"github.com/example/platform-apiserver/pkg/registry/postgres/internal/registrytest"
	"github.com/example/platform-apiserver/pkg/registry/postgres/views"
	"github.com/example/platform-apiserver/pkg/registry/store"
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
	s, b := registrytest.Setup(t, postgres.Options{})
	ctx := b.Ctx
	for i := 0; i < 3000; i += 500 {
		var nodes []store.Node
		for j := i; j < i+500; j++ {
			nodes = append(nodes, pgtesting.Node(fmt.Sprintf("n%04d", j), 4000, 8<<30))
		}
		registrytest.MustApply(t, s, ctx, store.Batch{ClusterID: "big", Nodes: nodes})
	}
	for _, name := range []string{"a", "b", "c"} {
		registrytest.MustApply(t, s, ctx, store.Batch{ClusterID: "small", Nodes: []store.Node{pgtesting.Node(name, 1000, 1<<30)}})
	}
	conn := b.Connect(t)
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
	reads := map[string]int64{}
	var name string
	var n int64
	if _, err := pgx.ForEachRow(rows, []any{&name, &n}, func() error { reads[name] = n; return nil }); err != nil {
		t.Fatal(err)
	}
	return reads
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
