// Package views is the registry's views, its reads: each view table
// declared once (View: its kind, keyset, columns and how a row becomes a
// record), and what is built from the declaration — the column list, the
// scan, the get, the list and stream pages with their selectors, the API's
// Source, and the statements that write a batch's rows (view_write.go,
// which the write engine runs). Placement reads the node view too.
//
// It is not the writes themselves (the store's write engine), nor the
// change log's reader (package changelog), which decodes a view's entries
// with the scan declared here. Reads reach the database through a Reader,
// which the store implements.
package views

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/example/platform-apiserver/pkg/registry/postgres/pgdb"
	"github.com/example/platform-apiserver/pkg/registry/store"
)

// View declares one view table once: its kind, its keyset, its columns and
// how a row becomes a record. Everything the store reads of it is built
// from the declaration (Declare): the column list, the scan, the get, the
// list and stream pages, the change feed's decoding and the API's Source.
type View[R any] struct {
	// Kind is the change feed's kind of the table's rows.
	Kind store.Kind
	// Resource names the view in continue tokens and errors.
	Resource string
	Table    string
	// Order is the keyset: two key columns, bytewise (COLLATE "C") order.
	Order [2]string
	// Columns are read in this order.
	Columns []Column[R]
	// Key is a record's keyset key (its two order columns).
	Key func(*R) store.ListKey
	// Name maps an object's namespace and name to its key; false: the
	// name cannot be one of the view's objects (a get answers not found).
	Name func(namespace, name string) (store.ListKey, bool)
	// Finish, if set, completes a scanned record: fields derived from
	// others, groups of columns that are NULL together.
	Finish func(*R)
	// Aggregates are the columns the write engine computes from the
	// member's rows and the upsert writes with a batch's rows.
	Aggregates []string

	// Built by Declare.
	columnList string // "a, b, c"
	getSQL     string
	upsertSQL  string // input columns and aggregates
	stampSQL   string // aggregates only
	changedSQL string // the input rows upsertSQL would write
}

// Column is one column of a view table.
type Column[R any] struct {
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

// Col declares a column the registry derives, scanned straight into the
// field target points to.
func Col[R, F any](name string, target func(*R) *F) Column[R] {
	return Column[R]{name: name, target: func(r *R) any { return target(r) }}
}

// Declare completes v's statements.
func Declare[R any](v View[R]) *View[R] {
	v.columnList = strings.Join(v.ColumnNames(), ", ")
	v.getSQL = fmt.Sprintf("SELECT %s FROM %s WHERE %s = $1 AND %s = $2", v.columnList, v.Table, v.Order[0], v.Order[1])
	if len(v.inputs()) > 0 {
		v.upsertSQL, v.changedSQL = v.upsertStatement(), v.changedStatement()
	}
	if len(v.Aggregates) > 0 {
		v.stampSQL = v.stampStatement()
	}
	return &v
}

// ColumnNames are the view's columns, in the order a scan reads them.
func (v *View[R]) ColumnNames() []string {
	names := make([]string, len(v.Columns))
	for i, c := range v.Columns {
		names[i] = c.name
	}
	return names
}

// Scan reads a row of the view's columns into a record.
func (v *View[R]) Scan(row pgx.Row) (R, error) {
	var r R
	targets := make([]any, len(v.Columns))
	for i, c := range v.Columns {
		targets[i] = c.target(&r)
	}
	if err := row.Scan(targets...); err != nil {
		return r, err
	}
	if v.Finish != nil {
		v.Finish(&r)
	}
	return r, nil
}

// Get reads the record with key k.
func (v *View[R]) Get(ctx context.Context, r Reader, k store.ListKey) (*R, error) {
	rec, err := pgdb.GetRow(ctx, r.Primary(), v.Scan, v.getSQL, k[0], k[1])
	if err != nil {
		return nil, fmt.Errorf("get %s %s: %w", v.Resource, strings.Join(k[:], "/"), pgdb.InterpretError(err))
	}
	return &rec, nil
}

// Source is what the API serves the view from, its reads and its kind in
// the change feed.
func (v *View[R]) Source(r Reader) store.Source[R] {
	return store.Source[R]{
		Kind: v.Kind,
		Get: func(ctx context.Context, namespace, name string) (*R, error) {
			k, ok := v.Name(namespace, name)
			if !ok {
				return nil, store.ErrNotFound
			}
			return v.Get(ctx, r, k)
		},
		List: func(ctx context.Context, opts store.ListOptions) (*store.Page[R], error) {
			return list(ctx, r, v, opts)
		},
		Stream: func(ctx context.Context, opts store.ListOptions, pageSize int, yield func(store.StreamPage[R]) error) error {
			return stream(ctx, r, v, opts, pageSize, yield)
		},
		Key: v.Key,
	}
}

// Logged is a view as the change log reads its entries, which hold rows
// of Table: its columns and its scan.
type Logged struct {
	Kind    store.Kind
	Table   string
	Columns []string
	// Scan reads a row of Columns into a new record (a *R).
	Scan func(pgx.Row) (any, error)
}

// Logged is the view as the change log reads it.
func (v *View[R]) Logged() Logged {
	return Logged{Kind: v.Kind, Table: v.Table, Columns: v.ColumnNames(), Scan: func(row pgx.Row) (any, error) {
		r, err := v.Scan(row)
		return &r, err
	}}
}

// InChangeLog are the registry's views as the change log reads them: every
// view table has the change log's triggers.
func InChangeLog() []Logged {
	return []Logged{ClusterCapacity.Logged(), ClusterNamespace.Logged(), NodeCapacity.Logged()}
}

// query is the ordered SELECT of the view's rows matching conds: assembled
// at run time from the selectors.
func (v *View[R]) query(conds []string) string {
	query := "SELECT " + v.columnList + " FROM " + v.Table
	if len(conds) > 0 {
		query += " WHERE " + strings.Join(conds, " AND ")
	}
	return query + " ORDER BY " + v.Order[0] + ", " + v.Order[1]
}
