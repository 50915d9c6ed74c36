// Package usage is the registry's usage history: a scrape's samples
// recorded and the usage due reported on the view rows (Recorder, through
// the write engine, package writes), the hourly partitions of the node
// samples and the hourly rollups of node and namespace samples, kept
// (partitions made and dropped, rollups expired, stale usage made
// unknown) and read (averages, maxima, percentiles, series). See
// docs/usage-history.md.
package usage

import (
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/example/platform-apiserver/pkg/registry/postgres/pgdb"
	"github.com/example/platform-apiserver/pkg/registry/store"
)

// ReadTx runs fn in a read-only transaction; fn may run twice.
type ReadTx func(ctx context.Context, fn func(pgx.Tx) error) error

// NodeSelector turns label requirements on nodes into SQL conditions (to
// be ANDed) over cluster_node, adding their parameters to args: the views'
// selector SQL.
type NodeSelector func(args *pgdb.Args, reqs labels.Requirements) ([]string, error)

// History summarizes the usage samples q selects from the hourly
// rollups (migration 010), not the samples themselves: a day of a
// 5,000-node member is its 24 rows (and an index scan of its nodes' rows
// to count them), of a 250-node pool 6,000 rows, each with its histograms.
// It reads in a transaction of readTx; nodes selects the nodes of q.Labels.
func History(ctx context.Context, readTx ReadTx, nodes NodeSelector, q store.UsageQuery) (*store.UsageHistory, error) {
	if q.ClusterID == "" {
		return nil, fmt.Errorf("%w: a usage query needs a member cluster", store.ErrInvalidSelector)
	}
	var args pgdb.Args
	where := []string{"cluster_id = " + args.Add(q.ClusterID), "hour > " + args.Add(q.Since.Add(-time.Hour))}
	table, nodeFilter := "cluster_node_usage_hourly", "node <> ''"
	switch {
	case q.Namespace != "":
		table, nodeFilter = "cluster_namespace_usage_hourly", ""
		where = append(where, "namespace = "+args.Add(q.Namespace))
	case q.Node != "":
		nodeFilter = "node = " + args.Add(q.Node)
		where = append(where, nodeFilter)
	case len(q.Labels) > 0:
		conds, err := nodes(&args, q.Labels)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", store.ErrInvalidSelector, err)
		}
		nodeFilter = "node IN (SELECT name FROM cluster_node WHERE cluster_id = " + args.Add(q.ClusterID) + " AND " + strings.Join(conds, " AND ") + ")"
		where = append(where, nodeFilter)
	default:
		where = append(where, "node = ''") // the member's own rollup
	}
	filter := strings.Join(where, " AND ")
	h := &store.UsageHistory{}
	err := readTx(ctx, func(tx pgx.Tx) error {
		var from, to, asOf *time.Time
		err := tx.QueryRow(ctx, `SELECT (SELECT usage_observed_at FROM cluster_capacity WHERE cluster_id = $1)`, q.ClusterID).Scan(&asOf)
		if err != nil {
			return err
		}
		if asOf != nil {
			h.SamplesAsOf = asOf.UTC()
		}
		err = tx.QueryRow(ctx, `
			SELECT coalesce(sum(samples), 0)::bigint,
				coalesce(round(sum(cpu_sum) / nullif(sum(samples), 0)), 0)::bigint, coalesce(max(cpu_max), 0),
				coalesce(round(sum(memory_sum) / nullif(sum(samples), 0)), 0)::bigint, coalesce(max(memory_max), 0),
				min(hour), max(hour)
			FROM `+table+` WHERE `+filter, args...).
			Scan(&h.Samples, &h.CPU.Average, &h.CPU.Max, &h.Memory.Average, &h.Memory.Max, &from, &to)
		if err != nil {
			return err
		}
		if h.Samples == 0 {
			return knownToRegistry(ctx, tx, q)
		}
		h.From, h.To = from.UTC(), to.Add(time.Hour).UTC()
		if nodeFilter != "" {
			if err := tx.QueryRow(ctx, `SELECT count(DISTINCT node) FROM cluster_node_usage_hourly WHERE `+
				strings.Join(append(where[:2:2], nodeFilter), " AND "), args...).Scan(&h.Nodes); err != nil {
				return err
			}
		}
		if q.Step > 0 {
			if h.Series, err = usageSeries(ctx, tx, table, filter, args, q.Step); err != nil {
				return err
			}
		}
		return usagePercentiles(ctx, tx, table, filter, args, q, h)
	})
	if err != nil {
		return nil, fmt.Errorf("usage history of %s: %w", q.ClusterID, pgdb.InterpretError(err))
	}
	return h, nil
}

// usageSeries sums the rows of table that filter selects bucket by bucket:
// buckets of step aligned to multiples of it since the Unix epoch (the
// percentiles are usagePercentiles').
func usageSeries(ctx context.Context, tx pgx.Tx, table, filter string, args pgdb.Args, step time.Duration) ([]store.UsageBucket, error) {
	args = slices.Clone(args)
	rows, err := tx.Query(ctx, `
		SELECT `+binnedHour(&args, step)+` AS start, sum(samples)::bigint,
			round(sum(cpu_sum) / sum(samples))::bigint, max(cpu_max),
			round(sum(memory_sum) / sum(samples))::bigint, max(memory_max)
		FROM `+table+` WHERE `+filter+` AND samples > 0 GROUP BY 1 ORDER BY 1`, args...)
	if err != nil {
		return nil, err
	}
	var series []store.UsageBucket
	var b store.UsageBucket
	_, err = pgx.ForEachRow(rows, []any{&b.Start, &b.Samples, &b.CPU.Average, &b.CPU.Max, &b.Memory.Average, &b.Memory.Max}, func() error {
		b.Start = b.Start.UTC()
		series = append(series, b)
		return nil
	})
	return series, err
}

// binnedHour is the SQL of a row's hour binned to step (a parameter
// added to args).
func binnedHour(args *pgdb.Args, step time.Duration) string {
	return "date_bin(" + args.Add(step) + "::interval, hour, timestamptz '1970-01-01 00:00:00+00')"
}

// usagePercentiles fills the percentiles of h, and of each bucket of its
// series, from the histograms of the rows of table that filter selects,
// and the recommendation q asks.
func usagePercentiles(ctx context.Context, tx pgx.Tx, table, filter string, args pgdb.Args, q store.UsageQuery, h *store.UsageHistory) error {
	args, start := slices.Clone(args), "NULL::timestamptz"
	if q.Step > 0 {
		start = binnedHour(&args, q.Step)
	}
	rows, err := tx.Query(ctx, `SELECT `+start+`, cpu_buckets, cpu_counts, memory_buckets, memory_counts FROM `+table+` WHERE `+filter, args...)
	if err != nil {
		return err
	}
	cpu, memory := newHistogram(h.CPU.Max), newHistogram(h.Memory.Max)
	type pair struct{ cpu, memory *histogram }
	buckets := make(map[time.Time]pair, len(h.Series))
	for _, b := range h.Series {
		buckets[b.Start] = pair{newHistogram(b.CPU.Max), newHistogram(b.Memory.Max)}
	}
	var at *time.Time
	var cb, mb []int16
	var cn, mn []int64
	_, err = pgx.ForEachRow(rows, []any{&at, &cb, &cn, &mb, &mn}, func() error {
		cpu.add(cb, cn)
		memory.add(mb, mn)
		if at != nil {
			if p, ok := buckets[at.UTC()]; ok {
				p.cpu.add(cb, cn)
				p.memory.add(mb, mn)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	cpu.fill(&h.CPU)
	memory.fill(&h.Memory)
	if r := q.Recommend; r != nil {
		h.Recommendation = recommend(cpu, memory, *r)
	}
	for i := range h.Series {
		p := buckets[h.Series[i].Start]
		p.cpu.fill(&h.Series[i].CPU)
		p.memory.fill(&h.Series[i].Memory)
	}
	return nil
}

// histogram is one resource's samples by bucket (usage_bucket), merged
// from the hourly rows.
type histogram struct {
	counts map[int16]int64
	max    int64 // the exact maximum
}

func newHistogram(max int64) *histogram { return &histogram{max: max, counts: map[int16]int64{}} }

// add merges one row's histogram: ascending buckets and their counts.
func (h *histogram) add(buckets []int16, counts []int64) {
	for i, b := range buckets {
		if i < len(counts) {
			h.counts[b] += counts[i]
		}
	}
}

// fill sets the percentiles of st.
func (h *histogram) fill(st *store.UsageStats) {
	st.P50, st.P95, st.P99 = h.percentile(0.50), h.percentile(0.95), h.percentile(0.99)
}

// recommend sizes requests from the histograms of the samples.
func recommend(cpu, memory *histogram, r store.RecommendQuery) *store.UsageRecommendation {
	rec := &store.UsageRecommendation{
		Requests: store.UsageAmounts{CPU: roundUp(grow(cpu.percentile(r.Percentile), r.Headroom), nanocoresPerMilli),
			Memory: roundUp(grow(memory.percentile(r.Percentile), r.Headroom), bytesPerMiB)},
	}
	rec.Quota = store.UsageAmounts{CPU: max(roundUp(grow(cpu.max, r.Headroom), nanocoresPerMilli), rec.Requests.CPU),
		Memory: max(roundUp(grow(memory.max, r.Headroom), bytesPerMiB), rec.Requests.Memory)}
	rec.CPUCovered, rec.MemoryCovered = cpu.shareAtOrBelow(rec.Requests.CPU), memory.shareAtOrBelow(rec.Requests.Memory)
	return rec
}

const (
	nanocoresPerMilli = 1_000_000
	bytesPerMiB       = 1 << 20
)

// grow adds the fraction headroom to v, rounding up.
func grow(v int64, headroom float64) int64 {
	return int64(math.Ceil(float64(v) * (1 + headroom)))
}

// roundUp rounds v up to a multiple of unit.
func roundUp(v, unit int64) int64 {
	return (v + unit - 1) / unit * unit
}

// shareAtOrBelow is the share (0–1) of the samples whose bucket's
// representative (at most the maximum, as for percentile) is at most v:
// within a bucket's 2 % of the exact share.
func (h *histogram) shareAtOrBelow(v int64) float64 {
	var total, below int64
	for b, n := range h.counts {
		total += n
		if min(bucketValue(b), h.max) <= v {
			below += n
		}
	}
	if total == 0 {
		return 0
	}
	return float64(below) / float64(total)
}

// bucketGrowth is usage_bucket's ratio between a bucket's bounds.
const bucketGrowth = 1.02

// percentile is the nearest-rank percentile p (0–1): the representative of
// the bucket holding the sample of rank ceil(p·n), at most the maximum.
func (h *histogram) percentile(p float64) int64 {
	var total int64
	for _, n := range h.counts {
		total += n
	}
	if total == 0 {
		return 0
	}
	rank := max(int64(math.Ceil(p*float64(total))), 1)
	for _, b := range slices.Sorted(maps.Keys(h.counts)) {
		if rank -= h.counts[b]; rank <= 0 {
			return min(bucketValue(b), h.max)
		}
	}
	return h.max
}

// bucketValue represents bucket b's values [g^(b-1), g^b) within 1 %:
// 2·lo·hi/(lo+hi) is off by at most (g-1)/(g+1) of any of them.
func bucketValue(b int16) int64 {
	if b <= 0 {
		return 0
	}
	lo := math.Pow(bucketGrowth, float64(b-1))
	hi := lo * bucketGrowth
	return int64(math.Round(2 * lo * hi / (lo + hi)))
}

// knownToRegistry fails with store.ErrNotFound unless the registry holds
// q's member (and node): a query without samples of a known member or node
// answers an empty history, one of an unknown one is likely a typo.
func knownToRegistry(ctx context.Context, tx pgx.Tx, q store.UsageQuery) error {
	var known bool
	err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM cluster_node WHERE cluster_id = $1 AND ($2 = '' OR name = $2))
			AND ($3 = '' OR EXISTS (SELECT 1 FROM cluster_namespace WHERE cluster_id = $1 AND name = $3))`,
		q.ClusterID, q.Node, q.Namespace).Scan(&known)
	switch {
	case err != nil:
		return err
	case !known && q.Namespace != "":
		return fmt.Errorf("%w: member cluster %s has no namespace %s", store.ErrNotFound, q.ClusterID, q.Namespace)
	case !known && q.Node != "":
		return fmt.Errorf("%w: member cluster %s has no node %s", store.ErrNotFound, q.ClusterID, q.Node)
	case !known:
		return fmt.Errorf("%w: no member cluster %s", store.ErrNotFound, q.ClusterID)
	}
	return nil
}
