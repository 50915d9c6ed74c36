package changelog

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"k8s.io/klog/v2"

	"github.com/example/platform-apiserver/pkg/registry/postgres/pgdb"
)

var (
	sqlCompactStop         = statement("compact_stop")
	sqlCompactHorizon      = statement("compact_horizon")
	sqlCompactLockHorizon  = statement("compact_lock_horizon")
	sqlCompactDeleteBatch  = statement("compact_delete_batch")
	sqlCompactRaiseHorizon = statement("compact_raise_horizon")
)

// compactBatchSize bounds the entries one compaction transaction deletes.
const compactBatchSize = 1000

// Compact deletes change-log entries committed before olderThan and returns
// the new horizon: the highest deleted version, from which (and from any
// later version) Changes still serves every change. It deletes a prefix in
// version order: it stops at the first entry committed at or after olderThan
// (commit times follow transaction start, so they are not strictly ordered
// by version) and at the registry version it started at, so it ends under a
// steady stream of writes. Each batch is its own short transaction that
// touches neither registry_state nor the view rows, so writers never wait on
// it; concurrent Compact calls take turns on the horizon row.
func Compact(ctx context.Context, writes *pgdb.Pool, olderThan time.Time) (int64, error) {
	var stop int64 // exclusive bound
	err := writes.QueryRow(ctx, sqlCompactStop, olderThan).Scan(&stop)
	if err != nil {
		return 0, fmt.Errorf("compact change log: %w", pgdb.InterpretError(err))
	}
	var total int64
	for {
		n, err := compactBatch(ctx, writes, stop)
		if err != nil {
			return 0, fmt.Errorf("compact change log: %w", pgdb.InterpretError(err))
		}
		total += n
		if n < compactBatchSize {
			break
		}
	}
	var horizon int64
	if err := writes.QueryRow(ctx, sqlCompactHorizon).Scan(&horizon); err != nil {
		return 0, fmt.Errorf("compact change log: %w", pgdb.InterpretError(err))
	}
	if total > 0 {
		klog.FromContext(ctx).V(2).Info("Compacted registry change log", "deleted", total, "horizon", horizon)
	}
	return horizon, nil
}

// compactBatch deletes up to compactBatchSize of the oldest entries below stop and
// raises the horizon to the highest it deleted, in one transaction.
func compactBatch(ctx context.Context, writes *pgdb.Pool, stop int64) (int64, error) {
	var deleted int64
	err := pgx.BeginFunc(ctx, writes, func(tx pgx.Tx) error {
		var horizon int64
		if err := tx.QueryRow(ctx, sqlCompactLockHorizon).Scan(&horizon); err != nil {
			return err
		}
		var highest int64
		if err := tx.QueryRow(ctx, sqlCompactDeleteBatch, horizon, stop, compactBatchSize).Scan(&deleted, &highest); err != nil {
			return err
		}
		if deleted == 0 {
			return nil
		}
		_, err := tx.Exec(ctx, sqlCompactRaiseHorizon, highest)
		return err
	})
	return deleted, err
}
