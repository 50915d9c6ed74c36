package postgres

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/example/platform-apiserver/pkg/registry/postgres/pgdb"
	"github.com/example/platform-apiserver/pkg/registry/store"
)

// view declares one view table once: its kind, its keyset, its columns and
// how a row becomes a record. Everything the store reads of it is built
// from the declaration: the column list, the scan, the get, the list and
// stream pages, the change feed's decoding and the API's Source. A view
// declared with newView is in the change feed (views).
type view[R any] struct {
	// kind is the change feed's kind of the table's rows.
	kind store.Kind
	// resource names the view in continue tokens and errors.
	resource string
	table    string
	// order is the keyset: two key columns, bytewise (COLLATE "C") order.
	order [2]string
	// columns are read in this order.
	columns []column[R]
	// key is a record's keyset key (its two order columns).
	key func(*R) store.ListKey
	// name maps an object's namespace and name to its key; false: the
	// name cannot be one of the view's objects (a get answers not found).
	name func(namespace, name string) (store.ListKey, bool)
	// finish, if set, completes a scanned record: fields derived from
	// others, groups of columns that are NULL together.
	finish func(*R)
	// aggregates are the columns Apply computes from the member's rows
	// (computeAggregates) and the upsert writes with a batch's rows.
	aggregates []string

	// Built by newView.
	columnList string // "a, b, c"
	getSQL     string
	changesSQL string // readChanges
	upsertSQL  string // input columns and aggregates
	stampSQL   string // aggregates only
	changedSQL string // the input rows upsertSQL would write
}

// column is one column of a view table.
type column[R any] struct {
	name string
	// target returns where a scan stores the column in a record: a pointer
	// to a field, or a scanner that converts (NULL, sums, ...).
	target func(*R) any
	// sqlType and value are set for an input column, one discovery's
	// batches write (view_write.go): its type in a batch row and its
	// value there, encoded as JSON.
	sqlType string
	value   func(*R) any
}

// col declares a column the registry derives, scanned straight into the
// field target points to.
func col[R, F any](name string, target func(*R) *F) column[R] {
	return column[R]{name: name, target: func(r *R) any { return target(r) }}
}

// views are the views newView declared: those every Store's change feed
// decodes (Store.views).
var views []feedView

// feedView is a view as the change feed sees it.
type feedView interface {
	storeKind() store.Kind
	readChanges(ctx context.Context, tx pgx.Tx, clusterID string, after, upTo int64, byRV map[int64]*store.Change) error
}

// newView completes v's statements and adds it to every Store's change feed.
func newView[R any](v view[R]) *view[R] {
	d := declareView(v)
	views = append(views, d)
	return d
}

// declareView completes v's statements.
func declareView[R any](v view[R]) *view[R] {
	names := make([]string, len(v.columns))
	for i, c := range v.columns {
		names[i] = c.name
	}
	v.columnList = strings.Join(names, ", ")
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
		return `(SELECT to_jsonb(l) FROM ` + v.table + ` l
				WHERE l.cluster_id = c.cluster_id AND l.name = c.name AND l.resource_version = ` + version + `)`
	}
	v.changesSQL = `SELECT c.resource_version, c.type, c.cluster_id, v.is_prev, v.obj IS NULL, r.` + strings.Join(names, ", r.") + `
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
		CROSS JOIN LATERAL jsonb_populate_record(NULL::` + v.table + `, v.obj) AS r
		WHERE c.resource_version > $1 AND c.resource_version <= $2 AND c.kind = $3
			AND ($4 = '' OR c.cluster_id = $4) AND (v.obj IS NOT NULL OR NOT v.is_prev)`
	v.getSQL = fmt.Sprintf("SELECT %s FROM %s WHERE %s = $1 AND %s = $2", v.columnList, v.table, v.order[0], v.order[1])
	if len(v.inputs()) > 0 {
		v.upsertSQL, v.changedSQL = v.upsertStatement(), v.changedStatement()
	}
	if len(v.aggregates) > 0 {
		v.stampSQL = v.stampStatement()
	}
	return &v
}

// scan reads a row of the view's columns into a record.
func (v *view[R]) scan(row pgx.Row) (R, error) {
	var r R
	targets := make([]any, len(v.columns))
	for i, c := range v.columns {
		targets[i] = c.target(&r)
	}
	if err := row.Scan(targets...); err != nil {
		return r, err
	}
	if v.finish != nil {
		v.finish(&r)
	}
	return r, nil
}

// get reads the record with key k.
func (v *view[R]) get(ctx context.Context, s *Store, k store.ListKey) (*R, error) {
	r, err := pgdb.GetRow(ctx, s.reads, v.scan, v.getSQL, k[0], k[1])
	if err != nil {
		return nil, fmt.Errorf("get %s %s: %w", v.resource, strings.Join(k[:], "/"), pgdb.InterpretError(err))
	}
	return &r, nil
}

// source is what the API serves the view from.
func (v *view[R]) source(s *Store) store.Source[R] {
	return store.Source[R]{
		Get: func(ctx context.Context, namespace, name string) (*R, error) {
			k, ok := v.name(namespace, name)
			if !ok {
				return nil, store.ErrNotFound
			}
			return v.get(ctx, s, k)
		},
		List: func(ctx context.Context, opts store.ListOptions) (*store.Page[R], error) {
			return list(ctx, s, v, opts)
		},
		Stream: func(ctx context.Context, opts store.ListOptions, pageSize int, yield func(store.StreamPage[R]) error) error {
			return stream(ctx, s, v, opts, pageSize, yield)
		},
		Key: v.key,
	}
}

// query is the ordered SELECT of the view's rows matching conds: assembled
// at run time from the selectors.
func (v *view[R]) query(conds []string) string {
	query := "SELECT " + v.columnList + " FROM " + v.table
	if len(conds) > 0 {
		query += " WHERE " + strings.Join(conds, " AND ")
	}
	return query + " ORDER BY " + v.order[0] + ", " + v.order[1]
}

func (v *view[R]) storeKind() store.Kind { return v.kind }

// readChanges adds this view's change-log entries with after <
// resource_version <= upTo to byRV, only clusterID's unless that is empty.
// An entry stores the row before it (but for ADDED); the row after it is
// the next entry's row before, or the live row (changesSQL). Both are
// to_jsonb of a view row; jsonb_populate_record turns them back into the
// table's row type, from which the view's columns are selected and scanned
// by its own scan, so an entry decodes exactly as a get or a list decodes
// the row it was taken from.
func (v *view[R]) readChanges(ctx context.Context, tx pgx.Tx, clusterID string, after, upTo int64, byRV map[int64]*store.Change) error {
	rows, err := tx.Query(ctx, v.changesSQL, after, upTo, string(v.kind), clusterID)
	if err != nil {
		return fmt.Errorf("read %s changes: %w", v.kind, err)
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
		if err := rows.Scan(append(slices.Clip(head), make([]any, len(v.columns))...)...); err != nil {
			return fmt.Errorf("decode %s change: %w", v.kind, err)
		}
		if missing {
			return fmt.Errorf("read %s changes: entry %d of member %s has no state after it (no later entry took it as its "+
				"previous state and the live row is at another version): the change log is inconsistent", v.kind, rv, cluster)
		}
		for _, raw := range rows.RawValues() {
			size += len(raw)
		}
		r, err := v.scan(headRow{Row: rows, head: head})
		if err != nil {
			return fmt.Errorf("decode %s change %d: %w", v.kind, rv, err)
		}
		c := byRV[rv]
		if c == nil {
			c = &store.Change{ResourceVersion: rv, Type: store.ChangeType(typ), Kind: v.kind, ClusterID: cluster}
			byRV[rv] = c
		}
		if isPrev {
			c.Prev = &r
		} else {
			c.Object = &r
		}
		c.Size += size
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read %s changes: %w", v.kind, err)
	}
	return nil
}

// changeOverhead approximates what a decoded record holds beyond its
// columns' bytes as the server sent them (headers, maps, slices).
const changeOverhead = 512
