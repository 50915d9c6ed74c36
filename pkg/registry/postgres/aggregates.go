package postgres

import "fmt"

// Aggregates are materialized on the view rows so a list is a one-table
// scan. These statements recompute them for given (cluster, name) keys,
// passed as one jsonb parameter, and stamp only the rows whose values change.
var (
	sqlRecomputeNodes      = statement("aggregates_recompute_nodes")
	sqlRecomputeNamespaces = statement("aggregates_recompute_namespaces")
)

func (w *writer) recomputeNodes(keys pairs) error {
	return w.recompute("recompute node aggregates", sqlRecomputeNodes, keys)
}

func (w *writer) recomputeNamespaces(keys pairs) error {
	return w.recompute("recompute namespace aggregates", sqlRecomputeNamespaces, keys)
}

func (w *writer) recompute(what, sql string, keys pairs) error {
	if len(keys) == 0 {
		return nil
	}
	rows, err := jsonRows(keys.rows())
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return w.stamp(what, sql, rows, w.startRV)
}
