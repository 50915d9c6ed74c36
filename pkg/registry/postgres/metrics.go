package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/example/platform-apiserver/pkg/registry/store"
)

// InsertNodeMetrics stores samples in one statement, ignoring duplicates of
// (cluster, node, observed_at), and copies each affected node's latest
// sample onto its view row.
func (s *Store) InsertNodeMetrics(ctx context.Context, samples []store.NodeMetricsSample) (int64, error) {
	if len(samples) == 0 {
		return 0, nil
	}
	n := len(samples)
	clusters, nodes := make([]string, n), make([]string, n)
	cpu, mem := make([]int64, n), make([]int64, n)
	observed, window := make([]time.Time, n), make([]float64, n)
	for i, m := range samples {
		clusters[i], nodes[i], cpu[i], mem[i] = m.ClusterID, m.Node, m.CPUNanoCores, m.MemoryBytes
		observed[i], window[i] = m.ObservedAt, m.Window.Seconds()
	}
	var inserted int64
	err := s.write(ctx, func(w *writer) error {
		rows, err := w.tx.Query(ctx, `
			WITH ins AS (
				INSERT INTO cluster_node_metrics (cluster_id, node, cpu_usage_nanocores, memory_usage_bytes, observed_at, window_seconds)
				SELECT * FROM unnest($1::text[], $2::text[], $3::int8[], $4::int8[], $5::timestamptz[], $6::float8[])
				ON CONFLICT (cluster_id, node, observed_at) DO NOTHING
				RETURNING cluster_id, node)
			SELECT cluster_id, node, count(*) FROM ins GROUP BY cluster_id, node`,
			clusters, nodes, cpu, mem, observed, window)
		if err != nil {
			return fmt.Errorf("insert node metrics: %w", err)
		}
		touched := pairs{}
		for rows.Next() {
			var cluster, node string
			var count int64
			if err := rows.Scan(&cluster, &node, &count); err != nil {
				rows.Close()
				return err
			}
			touched.add(cluster, node)
			inserted += count
		}
		if err := rows.Err(); err != nil {
			return err
		}
		return w.recomputeNodes(touched)
	})
	if err != nil {
		return 0, fmt.Errorf("insert node metrics: %w", err)
	}
	return inserted, nil
}

// PruneNodeMetrics deletes samples observed before the given time, keeping
// each node's latest sample (which the node's view row shows).
func (s *Store) PruneNodeMetrics(ctx context.Context, before time.Time) (int64, error) {
	tag, err := s.pool.Exec(ctx, `
		DELETE FROM cluster_node_metrics m
		WHERE m.observed_at < $1 AND m.observed_at < (
			SELECT max(l.observed_at) FROM cluster_node_metrics l
			WHERE l.cluster_id = m.cluster_id AND l.node = m.node)`, before)
	if err != nil {
		return 0, fmt.Errorf("prune node metrics: %w", interpretError(err))
	}
	return tag.RowsAffected(), nil
}
