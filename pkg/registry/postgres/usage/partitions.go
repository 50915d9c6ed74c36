package usage

import (
	"context"
	"embed"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/example/platform-apiserver/pkg/registry/postgres/pgdb"
)

// The samples history lives in cluster_node_metrics, partitioned by the
// hour of observed_at (migration 004), and is summarized in the hourly
// rollups (migration 010) that History reads. Maintenance makes the
// partitions of the coming hours and drops those, and the rollups, of the
// hours past the retention.

//go:embed sql/*.sql
var sqlFiles embed.FS

var statements = pgdb.NewLoader(sqlFiles)

var (
	sqlEnsurePartitions     = statements.Statement("metrics_ensure_partitions")
	sqlExpiredPartitions    = statements.Statement("metrics_expired_partitions")
	sqlPartitionLockTimeout = statements.Statement("metrics_partition_lock_timeout")
	// sqlExpireRollups deletes the usage rollups of the hours dropped.
	sqlExpireRollups = statements.Statement("metrics_expire_rollups")
)

// EnsurePartitions creates the hourly history partitions covering
// [from, to] that are missing.
func EnsurePartitions(ctx context.Context, db *pgdb.Pool, from, to time.Time) error {
	if _, err := db.Exec(ctx, sqlEnsurePartitions, from, to); err != nil {
		return fmt.Errorf("create node metrics partitions: %w", pgdb.InterpretError(err))
	}
	return nil
}

// DropPartitions drops the history partitions whose hour ended at or
// before `before`, each in its own short transaction.
func DropPartitions(ctx context.Context, db *pgdb.Pool, before time.Time) (int, error) {
	rows, err := db.Query(ctx, sqlExpiredPartitions, before)
	if err != nil {
		return 0, fmt.Errorf("list node metrics partitions: %w", pgdb.InterpretError(err))
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return 0, fmt.Errorf("list node metrics partitions: %w", pgdb.InterpretError(err))
	}
	dropped := 0
	for _, name := range names {
		err := pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
			// A bounded wait for the parent's lock (metrics_partition_lock_timeout.sql);
			// on timeout the drop is retried at the next maintenance.
			if _, err := tx.Exec(ctx, sqlPartitionLockTimeout); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, `DROP TABLE IF EXISTS `+pgx.Identifier{name}.Sanitize())
			return err
		})
		if err != nil {
			return dropped, fmt.Errorf("drop node metrics partition %s: %w", name, pgdb.InterpretError(err))
		}
		dropped++
	}
	return dropped, nil
}

// ExpireRollups deletes the hourly usage rollups of nodes and namespaces of
// the hours that ended at or before `before`, as DropPartitions drops the
// history partitions of those hours.
func ExpireRollups(ctx context.Context, db *pgdb.Pool, before time.Time) error {
	if _, err := db.Exec(ctx, sqlExpireRollups, before); err != nil {
		return fmt.Errorf("expire usage rollups: %w", pgdb.InterpretError(err))
	}
	return nil
}
