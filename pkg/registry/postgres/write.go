package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// writer is one write transaction. Every writer first locks the single
// registry_state row, so writers run one at a time and the sequence values
// they take are handed out in commit order (see docs/registry.md).
type writer struct {
	ctx context.Context
	tx  pgx.Tx
	// startRV is the registry resourceVersion when the lock was taken; rows
	// with a higher resource_version were stamped by this transaction.
	startRV int64
	// maxRV is the highest sequence value this transaction took.
	maxRV int64
}

// write runs fn in a serialized write transaction and then records the
// highest resourceVersion it took in registry_state. It measures the wait
// for and the hold of the writer lock, and counts the objects changed.
func (s *Store) write(ctx context.Context, o op, fn func(w *writer) error) error {
	var locked time.Time
	changed := map[string]int64{}
	begin := time.Now()
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		w := &writer{ctx: ctx, tx: tx}
		if err := tx.QueryRow(ctx, `SELECT resource_version FROM registry_state FOR UPDATE`).Scan(&w.startRV); err != nil {
			return fmt.Errorf("lock registry_state: %w", err)
		}
		locked = time.Now()
		writerLockWait.WithLabelValues(string(o)).Observe(locked.Sub(begin).Seconds())
		w.maxRV = w.startRV
		if err := fn(w); err != nil {
			return err
		}
		if w.maxRV == w.startRV {
			return nil
		}
		if err := w.countChanges(changed); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `UPDATE registry_state SET resource_version = $1`, w.maxRV)
		return err
	})
	if !locked.IsZero() {
		writerLockHold.WithLabelValues(string(o)).Observe(time.Since(locked).Seconds())
	}
	if err != nil {
		writeFailures.WithLabelValues(string(o)).Inc()
		return interpretError(err)
	}
	for kind, n := range changed {
		objectsChanged.WithLabelValues(kind).Add(float64(n))
	}
	return nil
}

// countChanges counts this transaction's change-feed entries by kind: a
// short primary-key range, every entry above the start version.
func (w *writer) countChanges(into map[string]int64) error {
	rows, err := w.tx.Query(w.ctx, `SELECT kind, count(*) FROM registry_change WHERE resource_version > $1 GROUP BY kind`, w.startRV)
	if err != nil {
		return fmt.Errorf("count changes: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var kind string
		var n int64
		if err := rows.Scan(&kind, &n); err != nil {
			return err
		}
		into[kind] = n
	}
	return rows.Err()
}

// stamp runs a statement that returns the highest resource_version it
// assigned (0 if none) and remembers it.
func (w *writer) stamp(what, sql string, args ...any) error {
	var rv int64
	if err := w.tx.QueryRow(w.ctx, sql, args...).Scan(&rv); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	w.maxRV = max(w.maxRV, rv)
	return nil
}

// stampCounted runs a statement that returns how many rows it stamped and
// the highest resource_version it assigned (0 if none), and remembers the
// latter.
func (w *writer) stampCounted(what, sql string, args ...any) (int64, error) {
	var n, rv int64
	if err := w.tx.QueryRow(w.ctx, sql, args...).Scan(&n, &rv); err != nil {
		return 0, fmt.Errorf("%s: %w", what, err)
	}
	w.maxRV = max(w.maxRV, rv)
	return n, nil
}

// deleteViewRows runs a DELETE of view rows (cluster_node,
// cluster_namespace). The change-log trigger gives each deleted row the
// version of its tombstone (migration 002); this reads the highest back.
func (w *writer) deleteViewRows(what, sql string, args ...any) error {
	tag, err := w.tx.Exec(w.ctx, sql, args...)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if tag.RowsAffected() == 0 {
		return nil
	}
	return w.stamp(what, `SELECT coalesce(max(resource_version), 0) FROM registry_change WHERE resource_version > $1`, w.startRV)
}

// nextRV is the SQL that stamps a row: a row already stamped by this
// transaction keeps its value, so one commit gives each row one version.
// $N must be bound to w.startRV.
func nextRV(table, startParam string) string {
	return "CASE WHEN " + table + ".resource_version > " + startParam +
		" THEN " + table + ".resource_version ELSE nextval('registry_resource_version') END"
}

// pairs is a set of (cluster, name) keys, e.g. nodes whose aggregates to recompute.
type pairs map[[2]string]struct{}

func (p pairs) add(cluster, name string) {
	if name != "" {
		p[[2]string{cluster, name}] = struct{}{}
	}
}

// arrays returns the keys as two parallel arrays for unnest.
func (p pairs) arrays() (clusters, names []string) {
	for k := range p {
		clusters = append(clusters, k[0])
		names = append(names, k[1])
	}
	return clusters, names
}
