package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/example/platform-apiserver/pkg/registry/store"
)

// legacyMetricsWriter is the scraper's write path of the design before
// commit fba8770 ("Quiet fleet"), kept here as the baseline the quiet-fleet
// benchmark measures the new design against: postgres.Store's
// InsertNodeMetrics and PruneNodeMetrics as of 487c113, with the writer
// protocol (the registry_state lock, nextRV and the registry_state update of
// write.go) and the node recompute (recomputeNodesSQL of aggregates.go, with
// its latest-usage lookup) they ran. The SQL is verbatim; only the Go around
// it is renamed to live in this package. It runs on a database at migration
// 003: one unpartitioned cluster_node_metrics with an observed_at index.
type legacyMetricsWriter struct {
	pool *pgxpool.Pool
}

func newLegacyMetricsWriter(ctx context.Context, dsn string) (*legacyMetricsWriter, error) {
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		return nil, fmt.Errorf("connect to the baseline database: %w", err)
	}
	return &legacyMetricsWriter{pool: pool}, nil
}

// InsertNodeMetrics stores samples in one statement, ignoring duplicates of
// (cluster, node, observed_at), and copies each affected node's latest
// sample onto its view row.
func (s *legacyMetricsWriter) InsertNodeMetrics(ctx context.Context, samples []store.NodeMetricsSample) (int64, error) {
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
	err := s.write(ctx, func(w *legacyWriter) error {
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
		touched := legacyPairs{}
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
func (s *legacyMetricsWriter) PruneNodeMetrics(ctx context.Context, before time.Time) (int64, error) {
	tag, err := s.pool.Exec(ctx, `
		DELETE FROM cluster_node_metrics m
		WHERE m.observed_at < $1 AND m.observed_at < (
			SELECT max(l.observed_at) FROM cluster_node_metrics l
			WHERE l.cluster_id = m.cluster_id AND l.node = m.node)`, before)
	if err != nil {
		return 0, fmt.Errorf("prune node metrics: %w", err)
	}
	return tag.RowsAffected(), nil
}

// legacyWriter is one write transaction (write.go's writer).
type legacyWriter struct {
	ctx     context.Context //nolint:containedctx // a handle on one transaction, as write.go's writer
	tx      pgx.Tx
	startRV int64
	maxRV   int64
}

// write runs fn in a serialized write transaction and then records the
// highest resourceVersion it took in registry_state.
func (s *legacyMetricsWriter) write(ctx context.Context, fn func(w *legacyWriter) error) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		w := &legacyWriter{ctx: ctx, tx: tx}
		if err := tx.QueryRow(ctx, `SELECT resource_version FROM registry_state FOR UPDATE`).Scan(&w.startRV); err != nil {
			return fmt.Errorf("lock registry_state: %w", err)
		}
		w.maxRV = w.startRV
		if err := fn(w); err != nil {
			return err
		}
		if w.maxRV == w.startRV {
			return nil
		}
		_, err := tx.Exec(ctx, `UPDATE registry_state SET resource_version = $1`, w.maxRV)
		return err
	})
}

// stamp runs a statement that returns the highest resource_version it
// assigned (0 if none) and remembers it.
func (w *legacyWriter) stamp(what, sql string, args ...any) error {
	var rv int64
	if err := w.tx.QueryRow(w.ctx, sql, args...).Scan(&rv); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	w.maxRV = max(w.maxRV, rv)
	return nil
}

// legacyNextRV is write.go's nextRV: a row already stamped by this
// transaction keeps its value, so one commit gives each row one version.
func legacyNextRV(table, startParam string) string {
	return "CASE WHEN " + table + ".resource_version > " + startParam +
		" THEN " + table + ".resource_version ELSE nextval('registry_resource_version') END"
}

// legacyRecomputeNodesSQL sets requested resources, pod count and latest
// usage of nodes $1/$2 (parallel arrays); $3 is the writer's start
// resourceVersion.
var legacyRecomputeNodesSQL = `
WITH t AS (
	SELECT DISTINCT cluster_id, name FROM unnest($1::text[], $2::text[]) AS t(cluster_id, name)
), agg AS (
	SELECT t.cluster_id, t.name,
		coalesce(sum(p.cpu_request_millis), 0)::bigint   AS cpu,
		coalesce(sum(p.memory_request_bytes), 0)::bigint AS mem,
		count(p.name)::bigint                            AS pods
	FROM t LEFT JOIN cluster_pod p
		ON p.cluster_id = t.cluster_id AND p.node_name = t.name AND p.phase NOT IN ('Succeeded', 'Failed')
	GROUP BY t.cluster_id, t.name
), latest AS (
	SELECT t.cluster_id, t.name, m.cpu_usage_nanocores, m.memory_usage_bytes, m.observed_at, m.window_seconds
	FROM t LEFT JOIN LATERAL (
		SELECT * FROM cluster_node_metrics m
		WHERE m.cluster_id = t.cluster_id AND m.node = t.name
		ORDER BY m.observed_at DESC LIMIT 1
	) m ON true
), changed AS (
	UPDATE cluster_node n SET
		requested_cpu_millis   = agg.cpu,
		requested_memory_bytes = agg.mem,
		pod_count              = agg.pods,
		usage_cpu_nanocores    = l.cpu_usage_nanocores,
		usage_memory_bytes     = l.memory_usage_bytes,
		usage_observed_at      = l.observed_at,
		usage_window_seconds   = l.window_seconds,
		resource_version       = ` + legacyNextRV("n", "$3") + `
	FROM agg JOIN latest l ON l.cluster_id = agg.cluster_id AND l.name = agg.name
	WHERE n.cluster_id = agg.cluster_id AND n.name = agg.name
		AND (n.requested_cpu_millis, n.requested_memory_bytes, n.pod_count,
			n.usage_cpu_nanocores, n.usage_memory_bytes, n.usage_observed_at, n.usage_window_seconds)
		IS DISTINCT FROM (agg.cpu, agg.mem, agg.pods,
			l.cpu_usage_nanocores, l.memory_usage_bytes, l.observed_at, l.window_seconds)
	RETURNING n.resource_version
)
SELECT coalesce(max(resource_version), 0) FROM changed`

func (w *legacyWriter) recomputeNodes(keys legacyPairs) error {
	if len(keys) == 0 {
		return nil
	}
	clusters, names := keys.arrays()
	return w.stamp("recompute node aggregates", legacyRecomputeNodesSQL, clusters, names, w.startRV)
}

// legacyPairs is write.go's pairs: a set of (cluster, name) keys.
type legacyPairs map[[2]string]struct{}

func (p legacyPairs) add(cluster, name string) {
	if name != "" {
		p[[2]string{cluster, name}] = struct{}{}
	}
}

// arrays returns the keys as two parallel arrays for unnest.
func (p legacyPairs) arrays() (clusters, names []string) {
	for k := range p {
		clusters = append(clusters, k[0])
		names = append(names, k[1])
	}
	return clusters, names
}
