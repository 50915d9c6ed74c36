package writes

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// Aggregates are materialized on the view rows so a list is a one-table
// scan. Apply computes them in its member section, under the member's lock
// (they read only the member's rows, which every writer of them holds that
// lock for), keeping those that change; the views section then only writes
// those values and stamps the rows (views.View.StampSQL).
var (
	sqlAggregateNodes      = statement("aggregates_nodes")
	sqlAggregateNamespaces = statement("aggregates_namespaces")
	sqlAggregateMemberRows = statement("aggregates_member_rows")
)

// aggregates are the computed aggregates of one view's rows, as JSON
// arrays of rows of the view's table: those of the rows the batch writes,
// for their upsert, and those of the others whose values change, for the
// stamping statement.
type aggregates struct {
	what, stampSQL string
	written        []byte
	rows           []byte
	n              int // how many rows holds
}

// aggregate computes the aggregates (sql: aggregates_nodes or
// aggregates_namespaces) of the rows keyed in keys, and keeps those of the
// rows the batch writes (written: names, never nil: the statement reads a
// SQL array) and those that differ from their row's.
func (w *Writer) aggregate(what, sql, stampSQL string, keys pairs, written []string) (aggregates, error) {
	return w.aggregateRows(what, sql, stampSQL, keys.rows(), written)
}

// aggregateRows is aggregate of keys given as rows.
func (w *Writer) aggregateRows(what, sql, stampSQL string, keys []pairRow, written []string) (aggregates, error) {
	out := aggregates{what: what, stampSQL: stampSQL, written: []byte("[]")}
	if len(keys) == 0 {
		return out, nil
	}
	param, err := JSONRows(keys)
	if err != nil {
		return out, fmt.Errorf("compute %s: %w", what, err)
	}
	if err := w.tx.QueryRow(w.ctx, sql, param, written).Scan(&out.written, &out.rows, &out.n); err != nil {
		return out, fmt.Errorf("compute %s: %w", what, err)
	}
	return out, nil
}

// querier runs a query: a pool, or a transaction.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// memberRows adds the names of the member's nodes and namespaces to nodes
// and namespaces.
func memberRows(ctx context.Context, q querier, cluster string, nodes, namespaces pairs) error {
	rows, err := q.Query(ctx, sqlAggregateMemberRows, cluster)
	if err != nil {
		return fmt.Errorf("list the rows of member %s: %w", cluster, err)
	}
	var isNode bool
	var name string
	_, err = pgx.ForEachRow(rows, []any{&isNode, &name}, func() error {
		if isNode {
			nodes.add(cluster, name)
		} else {
			namespaces.add(cluster, name)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("list the rows of member %s: %w", cluster, err)
	}
	return nil
}

// stampAggregates writes computed aggregates under a commit ticket and
// stamps the rows whose values change.
func (w *Writer) stampAggregates(a aggregates) error {
	if a.n == 0 {
		return nil
	}
	return w.Stamp("stamp "+a.what, a.stampSQL, a.rows, w.startRV)
}
