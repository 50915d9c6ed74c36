// Package changelog is the registry's change log, the reader's side: the
// changes of the views after a version, read in one snapshot and decoded
// by each view's own scan (Log.Read), the compaction that deletes old
// entries (Compact), and the notifications of commits that wake the change
// feed's follower (Listener).
//
// The writer's side is the view tables' statement triggers, PostgreSQL
// functions kept as sources in schema/functions (registry_log_insert.sql,
// registry_define_log_update.sql, registry_log_delete.sql,
// registry_change_delta.sql, registry_notify.sql), where the schema
// applies them (docs/change-log.md).
//
// It is not which server a read goes to nor the versions a process has
// seen (package replicas, the store's), and not the views' declarations
// (package views), whose rows the entries hold.
package changelog

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/example/platform-apiserver/pkg/registry/postgres/replicas"
	"github.com/example/platform-apiserver/pkg/registry/postgres/views"
	"github.com/example/platform-apiserver/pkg/registry/store"
)

// sqlChangesWindow reads a snapshot's registry version, the horizon and the
// last version within limit.
var sqlChangesWindow = statement("changefeed_window")

// sqlHistoryWindow is sqlChangesWindow for one kind's entries only,
// sqlMemberWindow for one kind's of one member: a watch's history read.
var (
	sqlHistoryWindow = statement("changefeed_history_window")
	sqlMemberWindow  = statement("changefeed_member_window")
)

// sqlKindsWindow is sqlChangesWindow for the entries of a list of kinds.
var sqlKindsWindow = statement("changefeed_kinds_window")

// planForValues runs a statement unnamed, so PostgreSQL plans it for its
// values each time: one member's entries are then read on the change log's
// (kind, member) index (migration 029). A named prepared statement, pgx's
// default, may switch to a generic plan after five runs, and the generic
// plan of a member's read walks every entry from its version on the
// primary key (TestHistoryReadOfAMemberReadsItsEntriesOnly). The statement's
// description is still cached: one round trip.
const planForValues = pgx.QueryExecModeCacheDescribe

// Log is the change log of a set of views.
type Log struct {
	views []loggedView
}

// New returns the change log of vs, each view's statement built once.
func New(vs ...views.Logged) *Log {
	l := &Log{}
	for _, v := range vs {
		l.views = append(l.views, newLoggedView(v))
	}
	return l
}

// Read returns up to limit changes a valid filter (store.ChangeFilter.Validate)
// matches with ResourceVersion > after, in order, read in tx (REPEATABLE
// READ READ ONLY) together with the registry resourceVersion (readAt) of
// its snapshot. A writer publishes its versions only after every earlier
// commit ticket committed or aborted, so the snapshot holds every change
// up to readAt and none above. A limit of 0 or less returns no changes,
// only readAt. An after below the compaction horizon, or among the
// versions a failover lost, fails with store.ErrCompacted; an after above
// readAt is not an error (nothing is newer yet).
func (l *Log) Read(ctx context.Context, tx pgx.Tx, filter store.ChangeFilter, after int64, limit int) ([]store.Change, int64, error) {
	kinds := filter.KindList()
	// upTo is the version of the last entry within limit, 0 if none.
	var readAt, horizon, upTo int64
	var ep replicas.LostVersions
	query, args := sqlChangesWindow, []any{after, max(limit, 0)}
	switch {
	case filter.Kind != "" && filter.ClusterID != "":
		query, args = sqlMemberWindow, append([]any{planForValues}, append(args, string(filter.Kind), filter.ClusterID)...)
	case filter.Kind != "":
		query, args = sqlHistoryWindow, append(args, string(filter.Kind))
	case kinds != nil:
		query, args = sqlKindsWindow, append(args, kinds)
	}
	err := tx.QueryRow(ctx, query, args...).Scan(&readAt, &horizon, &upTo, &ep.LostAfter, &ep.Floor)
	if err != nil {
		return nil, 0, err
	}
	if after < horizon {
		return nil, 0, fmt.Errorf("%w: resourceVersion %d is older than the oldest resumable %d", store.ErrCompacted, after, horizon)
	}
	if ep.Lost(after) {
		return nil, 0, fmt.Errorf("%w: resourceVersion %d was lost in a failover of the registry database (it holds changes up to %d, then from %d)",
			store.ErrCompacted, after, ep.LostAfter, ep.Floor+1)
	}
	if upTo == 0 {
		return nil, readAt, nil
	}
	byRV := map[int64]*store.Change{}
	for _, v := range l.views {
		if kinds == nil || slices.Contains(kinds, v.Kind) {
			if err := v.readChanges(ctx, tx, filter.ClusterID, after, upTo, byRV); err != nil {
				return nil, 0, err
			}
		}
	}
	changes := make([]store.Change, 0, len(byRV))
	for _, c := range byRV {
		changes = append(changes, *c)
	}
	slices.SortFunc(changes, func(a, b store.Change) int { return cmp.Compare(a.ResourceVersion, b.ResourceVersion) })
	return changes, readAt, nil
}

// loggedView is a view as the change log reads its entries (readChanges):
// of every member, or of one (on the (kind, member) index, migration 029).
type loggedView struct {
	views.Logged
	changesSQL, memberChangesSQL string
}

// newLoggedView builds the statement that reads v's entries.
func newLoggedView(v views.Logged) loggedView {
	// An entry's state after it: a tombstone's last state at its version,
	// else the base its row's later entries lead to (the last state of its
	// next deletion, else the live row) with their deltas laid over, the
	// earliest entry's value of a column winning, at the entry's version.
	// The state before it: a MODIFIED entry's state after with its delta
	// laid over, at prev_rv; a tombstone's last state (migration 022). Rows
	// with at most two later entries (a follower's reads, most of a
	// resume's) are read by joins, longer chains by a recursive walk; each
	// delta meets its version first, so a state is copied once. OFFSET 0
	// keeps the state after from being computed twice, once for each of the
	// VALUES that use it.
	rv := func(state, version string) string {
		return "(" + state + " || jsonb_build_object('resource_version', " + version + "))"
	}
	live := func(version string) string {
		return `(SELECT to_jsonb(l) FROM ` + v.Table + ` l
				WHERE l.cluster_id = c.cluster_id AND l.name = c.name AND l.resource_version = ` + version + `)`
	}
	changes := `SELECT c.resource_version, c.type, c.cluster_id, v.is_prev, v.obj IS NULL, r.` + strings.Join(v.Columns, ", r.") + `
		FROM registry_change c
		LEFT JOIN registry_change nx ON nx.prev_rv = c.resource_version
		LEFT JOIN registry_change nx2 ON nx2.prev_rv = nx.resource_version
		CROSS JOIN LATERAL (SELECT CASE
			WHEN c.type = 'DELETED' THEN ` + rv("c.prev_object", "c.resource_version") + `
			WHEN nx.type IS NULL THEN ` + live("c.resource_version") + `
			WHEN nx.type = 'DELETED' THEN nx.prev_object
			WHEN nx2.type IS NULL THEN ` + live("nx.resource_version") + ` || ` + rv("nx.prev_delta", "c.resource_version") + `
			WHEN nx2.type = 'DELETED' THEN nx2.prev_object || ` + rv("nx.prev_delta", "c.resource_version") + `
			ELSE (WITH RECURSIVE later AS (
					SELECT nx.resource_version, nx.type, nx.prev_delta, nx.prev_object
					UNION ALL
					SELECT n.resource_version, n.type, n.prev_delta, n.prev_object FROM later l
					JOIN registry_change n ON n.prev_rv = l.resource_version WHERE l.type = 'MODIFIED'
				), last AS (SELECT * FROM later ORDER BY resource_version DESC LIMIT 1)
				SELECT CASE WHEN (SELECT type FROM last) = 'DELETED' THEN (SELECT prev_object FROM last)
					ELSE ` + live("(SELECT resource_version FROM last)") + ` END
				|| ` + rv(`coalesce((SELECT jsonb_object_agg(d.key, d.value) FROM (SELECT DISTINCT ON (e.key) e.key, e.value
					FROM later, jsonb_each(later.prev_delta) e ORDER BY e.key, later.resource_version) d), '{}')`, "c.resource_version") + `)
			END AS after OFFSET 0) a
		CROSS JOIN LATERAL (VALUES (false, a.after), (true, CASE c.type
			WHEN 'MODIFIED' THEN a.after || ` + rv("c.prev_delta", "c.prev_rv") + `
			ELSE c.prev_object END)) AS v(is_prev, obj)
		CROSS JOIN LATERAL jsonb_populate_record(NULL::` + v.Table + `, v.obj) AS r
		WHERE c.resource_version > $1 AND c.resource_version <= $2 AND c.kind = $3
			AND (v.obj IS NOT NULL OR NOT v.is_prev)`
	return loggedView{Logged: v, changesSQL: changes, memberChangesSQL: changes + ` AND c.cluster_id = $4`}
}

// readChanges adds this view's change-log entries with after <
// resource_version <= upTo to byRV, only clusterID's unless that is empty.
// An entry stores the row before it (but for ADDED); the row after it is
// the next entry's row before, or the live row (changesSQL). Both are
// to_jsonb of a view row; jsonb_populate_record turns them back into the
// table's row type, from which the view's columns are selected and scanned
// by its own scan, so an entry decodes exactly as a get or a list decodes
// the row it was taken from.
func (v loggedView) readChanges(ctx context.Context, tx pgx.Tx, clusterID string, after, upTo int64, byRV map[int64]*store.Change) error {
	query, args := v.changesSQL, []any{after, upTo, string(v.Kind)}
	if clusterID != "" {
		query, args = v.memberChangesSQL, append([]any{planForValues}, append(args, clusterID)...)
	}
	rows, err := tx.Query(ctx, query, args...)
	if err != nil {
		return fmt.Errorf("read %s changes: %w", v.Kind, err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			rv              int64
			typ, cluster    string
			isPrev, missing bool
			size            = changeOverhead
		)
		head := []any{&rv, &typ, &cluster, &isPrev, &missing}
		if err := rows.Scan(append(slices.Clip(head), make([]any, len(v.Columns))...)...); err != nil {
			return fmt.Errorf("decode %s change: %w", v.Kind, err)
		}
		if missing {
			return fmt.Errorf("read %s changes: entry %d of member %s has no state after it (no later entry took it as its "+
				"previous state and the live row is at another version): the change log is inconsistent", v.Kind, rv, cluster)
		}
		for _, raw := range rows.RawValues() {
			size += len(raw)
		}
		r, err := v.Scan(headRow{Row: rows, head: head})
		if err != nil {
			return fmt.Errorf("decode %s change %d: %w", v.Kind, rv, err)
		}
		c := byRV[rv]
		if c == nil {
			c = &store.Change{ResourceVersion: rv, Type: store.ChangeType(typ), Kind: v.Kind, ClusterID: cluster}
			byRV[rv] = c
		}
		if isPrev {
			c.Prev = r
		} else {
			c.Object = r
		}
		c.Size += size
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read %s changes: %w", v.Kind, err)
	}
	return nil
}

// changeOverhead approximates what a decoded record holds beyond its
// columns' bytes as the server sent them (headers, maps, slices).
const changeOverhead = 512

// headRow scans a row's leading columns into head and the rest into the
// caller's targets, so a record scanner can read a row that carries more.
type headRow struct {
	pgx.Row
	head []any
}

func (r headRow) Scan(dest ...any) error {
	return r.Row.Scan(append(slices.Clip(r.head), dest...)...)
}
