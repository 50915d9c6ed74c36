package bench

import (
	"context"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/example/platform-apiserver/pkg/apis/platform/v1alpha1"
	"github.com/example/platform-apiserver/pkg/discovery"
	"github.com/example/platform-apiserver/pkg/registry/nodecapacity"
	"github.com/example/platform-apiserver/pkg/registry/store"
)

// The quiet-fleet benchmark: what a scrape of nodeCount nodes whose usage
// does not move writes and sends to watchers, what writing it costs, and
// what a day of history costs to keep and prune. See docs/benchmarks.md,
// "Quiet fleet: metrics write and watch events".
const (
	// The scraper's defaults (--metrics-interval, --metrics-retention).
	metricsInterval  = 30 * time.Second
	metricsRetention = 24 * time.Hour
	historySamples   = int(metricsRetention / metricsInterval) // a day per node
	samplesPerHour   = int(time.Hour / metricsInterval)
	// quietFleetScrapes follow the first (which reports every node).
	quietFleetScrapes = 10
	// From scrape crossingScrape on, every crossingEvery-th node uses
	// crossingStep more of its allocatable: twice the report threshold.
	crossingScrape = 5
	crossingEvery  = 100
	crossingStep   = 0.10
	// usageJitter is how far usage wanders from scrape to scrape.
	usageJitter = 0.01
	// After each scrape the marker node is relabelled in kube-apiserver:
	// its event ends the scrape's events in the stream.
	metricsMarkerNode    = nodeCount - 1
	metricsMarkerLabel   = "bench.platform.example.io/metrics-marker"
	metricsMarkerTimeout = 30 * time.Second
	// prunedHours hourly partitions are dropped, one at a time.
	prunedHours = 2
	// The quiet reference's scrapes use a period so long (200 years) that no
	// node comes due.
	quietReferenceScrapes = 6
	quietReferencePeriod  = 200 * 365 * 24 * time.Hour
)

// usageReporting is the scraper's default policy.
var usageReporting = discovery.DefaultConfig().Metrics.UsageReporting

// benchMetricsQuietFleet: 1. untimed, per scrape, the change-log rows and
// watch events before a marker, node for node against a model of the
// policy; 2. server stopped, on a day of history, one scrape per op, then
// the quiet reference; 3. the history's size and the prune of an hour.
func (d *discoveryEnv) benchMetricsQuietFleet(b *testing.B) {
	ctx := b.Context()
	must(b, d.ensureMirrored(ctx))
	f, err := d.newFleet(ctx)
	must(b, err)
	var res metricsResult
	res.scrapes, err = d.quietFleetEvents(ctx, f)
	must(b, err)
	for i, s := range res.scrapes {
		if !s.exact() {
			b.Errorf("scrape %d (%s): %d nodes reported, %d change-log rows, %d events, model %d due; unexpected events: %v",
				s.k, s.kind, s.reported, s.changeRows, s.events, s.due, s.unexpected)
		}
		// Each node refreshes at its own phase, never the fleet at once;
		// without a period (the default) none does.
		if i > 0 && float64(s.refresh) > 2*expectedRefresh() || usageReporting.Period == 0 && s.refresh > 0 {
			b.Errorf("scrape %d (%s): the model refreshes %d nodes at once, want about %.0f (nodes × interval / period): the phases do not spread",
				s.k, s.kind, s.refresh, expectedRefresh())
		}
	}

	must(b, d.cp.StopPlatformAPIServer())
	must(b, d.seedDayOfHistory(ctx, f, &res))
	// One untimed scrape first: the seed and the vacuum pushed the tables out
	// of PostgreSQL's buffers.
	if _, err := d.scrape(ctx, f, usageReporting, nil); err != nil {
		b.Fatal(err)
	}
	var total, quietTotal time.Duration
	for b.Loop() {
		b.StopTimer()
		op, err := d.scrape(ctx, f, usageReporting, b)
		must(b, err)
		res.ops++
		total += op.took
		if op.reported == 0 {
			quietTotal += op.took
			res.quietOps++
		} else {
			res.reportingOps = append(res.reportingOps, op)
		}
		b.StartTimer()
	}
	res.newWrite = total / time.Duration(res.ops)
	if res.quietOps > 0 {
		res.newQuietWrite = quietTotal / time.Duration(res.quietOps)
	}
	// The quiet reference (untimed by b): its mean against the loop's is the
	// period refresh's cost. The model is not updated; nothing after uses it.
	quiet := store.UsageReporting{Threshold: usageReporting.Threshold, Period: quietReferencePeriod}
	for range quietReferenceScrapes {
		op, err := d.scrape(ctx, f, quiet, nil)
		must(b, err)
		res.quietRefWrite += op.took / quietReferenceScrapes
	}
	res.quietRefOps = quietReferenceScrapes
	must(b, d.pruneHistory(ctx, &res))

	w := res.watchTotals()
	b.ReportMetric(float64(w.crossingEvents), "crossing-events")
	b.ReportMetric(w.meanRefreshEvents(), "refresh-events")
	b.ReportMetric(float64(w.maxRefreshEvents), "max-refresh-events")
	b.ReportMetric(float64(w.otherEvents), "other-events")
	b.ReportMetric(ms(res.newWrite), "new-ms")
	b.ReportMetric(ms(res.quietRefWrite), "quiet-ref-ms")
	b.ReportMetric(res.newBytesPerSample(), "new-B/sample")
	b.ReportMetric(ms(res.newPrune), "new-prune-ms")
	res.summarize()
}

// scrape writes the next scrape with policy, timed (by timed's clock too,
// when set), and checks it against the model, updated unless policy is the
// quiet reference's.
func (d *discoveryEnv) scrape(ctx context.Context, f *fleet, policy store.UsageReporting, timed *testing.B) (reportingOp, error) {
	k := d.scrapes
	d.scrapes++
	samples := f.samples(k)
	want, kind := int64(0), "quiet"
	if policy == usageReporting {
		due := f.report(samples)
		want, kind = int64(len(due.nodes)), due.kind
	}
	if timed != nil {
		timed.StartTimer()
	}
	t0 := time.Now()
	fence, err := d.memberFence(ctx)
	if err != nil {
		return reportingOp{}, err
	}
	rec, err := d.registry.RecordNodeMetrics(ctx, fence, samples, policy)
	op := reportingOp{reported: rec.Reported, took: time.Since(t0)}
	if timed != nil {
		timed.StopTimer()
	} else {
		kind += ", untimed"
	}
	if err != nil {
		return op, fmt.Errorf("scrape %d: %w", k, err)
	}
	if rec.Stored != nodeCount || rec.Reported != want {
		return op, fmt.Errorf("scrape %d (%s): stored %d and reported %d samples; want %d stored, %d reported", k, kind, rec.Stored, rec.Reported, nodeCount, want)
	}
	fmt.Fprintf(os.Stderr, "discovery: scrape %d (%s): %s, %d reported\n", k, kind, op.took.Round(time.Microsecond), rec.Reported)
	return op, nil
}

// metricsResult is what the quiet-fleet benchmark measured.
type metricsResult struct {
	scrapes                 []scrapeEvents // part 1, the first scrape included
	ops, quietOps           int            // the timed loop, and its scrapes that reported nothing
	newWrite, newQuietWrite time.Duration  // their means
	reportingOps            []reportingOp
	quietRefOps             int
	quietRefWrite           time.Duration
	newHistoryRows          int64
	newBytes                historySize
	newPrune                time.Duration // the slowest of prunedHours
	prunedRows              int64
	prunedHoursMeasured     int64
}

// watchTotals sums part 1's scrapes after the first; exact covers all.
type watchTotals struct {
	scrapes                            int
	exact                              bool
	crossing, crossingEvents           int // model's crossing nodes, their events
	refresh, refreshEvents             int // model's refreshed nodes, their events
	minRefreshEvents, maxRefreshEvents int // per scrape
	otherEvents, events                int
	platformCPU, kubeCPU               time.Duration
}

func (r metricsResult) watchTotals() watchTotals {
	t := watchTotals{exact: len(r.scrapes) > 0}
	for i, s := range r.scrapes {
		t.exact = t.exact && s.exact()
		if i == 0 {
			continue
		}
		t.scrapes++
		t.crossing += s.crossing
		t.crossingEvents += s.byReason["threshold"]
		t.refresh += s.refresh
		t.refreshEvents += s.byReason["period"]
		if t.scrapes == 1 || s.byReason["period"] < t.minRefreshEvents {
			t.minRefreshEvents = s.byReason["period"]
		}
		t.maxRefreshEvents = max(t.maxRefreshEvents, s.byReason["period"])
		t.otherEvents += s.byReason[""]
		t.events += s.events
		t.platformCPU += s.platformCPU
		t.kubeCPU += s.kubeCPU
	}
	return t
}

func (t watchTotals) meanRefreshEvents() float64 {
	return float64(t.refreshEvents) / float64(max(t.scrapes, 1))
}

// expectedRefresh is nodeCount × metricsInterval / period: the nodes whose
// period turns in a scrape interval on average (0 without a period).
func expectedRefresh() float64 {
	if usageReporting.Period == 0 {
		return 0
	}
	return float64(nodeCount) * metricsInterval.Seconds() / usageReporting.Period.Seconds()
}

type reportingOp struct {
	reported int64
	took     time.Duration
}

// historySize is the metrics history's size after the seed.
type historySize struct{ table, indexes, rows int64 }

func (h historySize) total() int64 { return h.table + h.indexes }

func (r metricsResult) newBytesPerSample() float64 {
	return float64(r.newBytes.total()) / float64(max(r.newBytes.rows, 1))
}

// ensureMirrored syncs the member first, as initial-sync does, unless the
// sub-benchmarks before left the server running on a mirror.
func (d *discoveryEnv) ensureMirrored(ctx context.Context) error {
	if d.cp.PlatformAPIServerPID() != 0 {
		if c, err := d.registryCounts(ctx); err == nil && c == d.want {
			return nil
		}
	}
	if err := d.cp.StopPlatformAPIServer(); err != nil {
		return err
	}
	if err := d.removeMember(ctx); err != nil {
		return err
	}
	start, err := d.startAndWaitSynced(ctx)
	if err != nil {
		return err
	}
	return start.wait(ctx)
}

// fleet makes the scrapes and models the policy: which nodes a scrape must
// report, and that nothing else may change.
type fleet struct {
	base        time.Time // scrape k is observed k intervals after it
	allocatable []store.Quantities
	phase       []float64                 // each node's offset into the period, as cluster_node_usage_phase
	reported    []store.NodeMetricsSample // ObservedAt zero: none
}

// newFleet reads each node's allocatable and phase from the registry and
// checks that none reports usage yet (there is no metrics.k8s.io).
func (d *discoveryEnv) newFleet(ctx context.Context) (*fleet, error) {
	f := &fleet{
		base:        time.Now().UTC().Truncate(time.Second),
		allocatable: make([]store.Quantities, nodeCount),
		phase:       make([]float64, nodeCount),
		reported:    make([]store.NodeMetricsSample, nodeCount),
	}
	rows, _ := d.db.Query(ctx, `
		SELECT name, allocatable_cpu_millis, allocatable_memory_bytes, usage_observed_at IS NOT NULL,
			cluster_node_usage_phase(cluster_id, name, $2)::float8
		FROM cluster_node WHERE cluster_id = $1`, discoveryClusterID, usageReporting.Period.Seconds())
	var name string
	var cpu, mem int64
	var usage bool
	var phase float64
	tag, err := pgx.ForEachRow(rows, []any{&name, &cpu, &mem, &usage, &phase}, func() error {
		i, err := strconv.Atoi(strings.TrimPrefix(name, "node-"))
		if err != nil || i < 0 || i >= nodeCount || nodeName(i) != name {
			return fmt.Errorf("unexpected node %q in the registry", name)
		}
		if usage {
			return fmt.Errorf("node %s already reports usage; the discovery environment has no metrics.k8s.io", name)
		}
		f.allocatable[i], f.phase[i] = store.Quantities{CPUMillis: cpu, MemoryBytes: mem}, phase
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read allocatable: %w", err)
	}
	seen := tag.RowsAffected()
	if seen != nodeCount {
		return nil, fmt.Errorf("%d nodes in the registry, want %d", seen, nodeCount)
	}
	return f, nil
}

// samples is scrape k: node i at 20–69 % of allocatable CPU and 30–69 % of
// memory, jittered, plus crossingStep for the crossing nodes from
// crossingScrape on.
func (f *fleet) samples(k int) []store.NodeMetricsSample {
	out := make([]store.NodeMetricsSample, nodeCount)
	for i := range out {
		jitter := float64((i*31+k*17)%21-10) / 10 * usageJitter
		cpu, mem := 0.20+float64(i%50)/100+jitter, 0.30+float64(i%40)/100-jitter
		if i%crossingEvery == crossingEvery/2 && k >= crossingScrape {
			cpu, mem = cpu+crossingStep, mem+crossingStep
		}
		a := f.allocatable[i]
		out[i] = store.NodeMetricsSample{
			ClusterID: discoveryClusterID, Node: nodeName(i),
			CPUNanoCores: int64(cpu * float64(a.CPUMillis) * 1e6), MemoryBytes: int64(mem * float64(a.MemoryBytes)),
			ObservedAt: f.base.Add(time.Duration(k) * metricsInterval), Window: 20 * time.Second,
		}
	}
	return out
}

// dueNodes is what the policy reports of a scrape: each node with why
// ("first", "threshold" or "period"; threshold wins over period), and the
// scrape's kind ("quiet", or the reasons joined by "+").
type dueNodes struct {
	nodes map[string]string
	kind  string
}

func (d dueNodes) count(why string) int {
	n := 0
	for _, w := range d.nodes {
		if w == why {
			n++
		}
	}
	return n
}

// report applies the policy (as RecordNodeMetrics does in SQL) to a scrape
// and remembers what it reports.
func (f *fleet) report(samples []store.NodeMetricsSample) dueNodes {
	out := dueNodes{nodes: map[string]string{}}
	reasons := map[string]bool{}
	abs := func(v int64) int64 { return max(v, -v) }
	for i, s := range samples {
		r, a := f.reported[i], f.allocatable[i]
		var why string
		switch {
		case r.ObservedAt.IsZero():
			why = "first"
		case !s.ObservedAt.After(r.ObservedAt):
			continue
		case abs(s.CPUNanoCores-r.CPUNanoCores) > int64(usageReporting.Threshold*float64(a.CPUMillis)*1e6),
			abs(s.MemoryBytes-r.MemoryBytes) > int64(usageReporting.Threshold*float64(a.MemoryBytes)):
			why = "threshold"
		case f.period(i, s.ObservedAt) > f.period(i, r.ObservedAt):
			why = "period"
		default:
			continue
		}
		reasons[why] = true
		out.nodes[nodecapacity.Name(s.ClusterID, s.Node)] = why
		f.reported[i] = s
	}
	var kinds []string
	for _, why := range []string{"first", "threshold", "period"} {
		if reasons[why] {
			kinds = append(kinds, why)
		}
	}
	out.kind = "quiet"
	if len(kinds) > 0 {
		out.kind = strings.Join(kinds, "+")
	}
	return out
}

// period numbers node i's report period that t falls in (always 0
// without a period).
func (f *fleet) period(i int, t time.Time) float64 {
	if usageReporting.Period == 0 {
		return 0
	}
	return math.Floor((float64(t.UnixMicro())/1e6 + f.phase[i]) / usageReporting.Period.Seconds())
}

// scrapeEvents is one scrape of part 1.
type scrapeEvents struct {
	k    int
	kind string
	// due, crossing, refresh: the model's nodes in all, for the threshold,
	// for a new period; reported: what RecordNodeMetrics did.
	due, crossing, refresh int
	stored, reported       int64
	changeRows             int64 // NodeCapacity entries in registry_change
	// events before the marker, byReason by the model's reason for their
	// node ("": not reported by the model, or a node's second), unexpected
	// those other events (at most 5).
	events     int
	byReason   map[string]int
	unexpected []string
	write      time.Duration
	// Server CPU from the scrape to the marker's event (10 ms resolution).
	platformCPU, kubeCPU time.Duration
}

func (s scrapeEvents) exact() bool {
	return s.events == int(s.reported) && s.changeRows == s.reported && int(s.reported) == s.due && len(s.unexpected) == 0
}

// quietFleetEvents is part 1: the first scrape and quietFleetScrapes more,
// each followed by the marker, counting what reaches the watch.
func (d *discoveryEnv) quietFleetEvents(ctx context.Context, f *fleet) ([]scrapeEvents, error) {
	g := newWatchGroup(ctx)
	defer g.close()
	w, err := d.watchNodeCapacities(ctx, g)
	if err != nil {
		return nil, err
	}
	platformPID, err := d.platformPID()
	if err != nil {
		return nil, err
	}
	kubePID, err := d.kubeAPIServerPID()
	if err != nil {
		return nil, err
	}
	// The first marker proves the watch is established.
	marker := 0
	if _, _, _, err := d.awaitMetricsMarker(ctx, w, marker, nil); err != nil {
		return nil, fmt.Errorf("first marker: %w", err)
	}
	var out []scrapeEvents
	for range quietFleetScrapes + 1 {
		k := d.scrapes
		d.scrapes++
		samples := f.samples(k)
		due := f.report(samples)
		s := scrapeEvents{k: k, kind: due.kind, due: len(due.nodes), crossing: due.count("threshold"), refresh: due.count("period")}
		var rvBefore int64
		if err := d.db.QueryRow(ctx, `SELECT resource_version FROM registry_state`).Scan(&rvBefore); err != nil {
			return nil, err
		}
		fence, err := d.memberFence(ctx)
		if err != nil {
			return nil, err
		}
		cpuBefore := cpuClock(platformPID, kubePID)
		t0 := time.Now()
		rec, err := d.registry.RecordNodeMetrics(ctx, fence, samples, usageReporting)
		s.write = time.Since(t0)
		if err != nil {
			return nil, fmt.Errorf("scrape %d: %w", k, err)
		}
		s.stored, s.reported = rec.Stored, rec.Reported
		if err := d.db.QueryRow(ctx, `SELECT count(*) FROM registry_change WHERE resource_version > $1 AND kind = 'NodeCapacity'`, rvBefore).Scan(&s.changeRows); err != nil {
			return nil, err
		}
		marker++
		s.events, s.byReason, s.unexpected, err = d.awaitMetricsMarker(ctx, w, marker, due.nodes)
		if err != nil {
			return nil, fmt.Errorf("scrape %d: %w", k, err)
		}
		cpuAfter := cpuClock(platformPID, kubePID)
		s.platformCPU, s.kubeCPU = cpuAfter[0]-cpuBefore[0], cpuAfter[1]-cpuBefore[1]
		fmt.Fprintf(os.Stderr, "discovery: scrape %d (%s): stored %d, reported %d (model %d: %d crossing, %d period refresh), %d change-log rows, %d watch events (%d crossing, %d refresh, %d other), write %s, CPU platform %s kube %s\n",
			k, s.kind, s.stored, s.reported, s.due, s.crossing, s.refresh, s.changeRows, s.events, s.byReason["threshold"], s.byReason["period"], s.byReason[""],
			s.write.Round(time.Microsecond), s.platformCPU, s.kubeCPU)
		out = append(out, s)
	}
	return out, nil
}

// awaitMetricsMarker sets the marker label to seq in kube-apiserver and
// reads the watch until its event arrives. It returns how many events came
// first, how many of a node in want by its reason there ("" for the others;
// want nil: expect none), and which were the others.
func (d *discoveryEnv) awaitMetricsMarker(ctx context.Context, receipts <-chan ncReceipt, seq int, want map[string]string) (int, map[string]int, []string, error) {
	node := nodeName(metricsMarkerNode)
	if err := d.relabel(ctx, "nodes", node, metricsMarkerLabel, strconv.Itoa(seq)); err != nil {
		return 0, nil, nil, err
	}
	markerName := nodecapacity.Name(discoveryClusterID, node)
	events, byReason, seen := 0, map[string]int{}, map[string]bool{}
	var unexpected []string
	err := receive(ctx, receipts, metricsMarkerTimeout, func(r ncReceipt) (bool, error) {
		if r.err != nil || (r.name == markerName && r.marker == strconv.Itoa(seq)) {
			return true, r.err
		}
		events++
		why := want[r.name]
		if seen[r.name] {
			why = ""
		}
		byReason[why]++
		if why == "" && len(unexpected) < 5 {
			unexpected = append(unexpected, string(r.typ)+" "+r.name)
		}
		seen[r.name] = true
		return false, nil
	}, func() error {
		return fmt.Errorf("no event of marker %d on %s within %s (%d other events)", seq, markerName, metricsMarkerTimeout, events)
	})
	return events, byReason, unexpected, err
}

// ncReceipt is one event, or the error that ended the watch.
type ncReceipt struct {
	typ          watch.EventType
	name, marker string
	err          error
}

// watchNodeCapacities watches NodeCapacities through the aggregator from
// now, in g, and sends a receipt of each event.
func (d *discoveryEnv) watchNodeCapacities(ctx context.Context, g *watchGroup) (<-chan ncReceipt, error) {
	c, err := g.client(d.cp.AdminConfig(), nil)
	if err != nil {
		return nil, err
	}
	rv, _, err := latestRV(ctx, c)
	if err != nil {
		return nil, err
	}
	receipts := make(chan ncReceipt, 4*nodeCount) // several scrapes': the reader never blocks
	f := follower{open: c.PlatformV1alpha1().NodeCapacities().Watch, event: func(ev watch.Event, _ time.Time) bool {
		nc, ok := ev.Object.(*v1alpha1.NodeCapacity)
		switch {
		case !ok:
			deliver(g.ctx, receipts, ncReceipt{err: fmt.Errorf("%s event with a %T", ev.Type, ev.Object)})
			return false
		case ev.Type == watch.Bookmark:
			return true
		}
		return deliver(g.ctx, receipts, ncReceipt{typ: ev.Type, name: nc.Name, marker: nc.Labels[metricsMarkerLabel]})
	}, ended: func(err error) bool {
		deliver(g.ctx, receipts, ncReceipt{err: err})
		return false
	}}
	g.goWatch(func(ctx context.Context) { f.follow(ctx, rv) })
	return receipts, nil
}

// seedHistorySQL writes $4 samples per node of cluster $1, $3 seconds apart
// and ending one interval before $2, in time order, as scrapes write them.
const seedHistorySQL = `
	INSERT INTO cluster_node_metrics (cluster_id, node, cpu_usage_nanocores, memory_usage_bytes, observed_at, window_seconds)
	SELECT n.cluster_id, n.name, n.allocatable_cpu_millis * (200000 + (i * 7919) % 500000),
	       n.allocatable_memory_bytes * (30 + (i * 104729) % 40) / 100,
	       $2::timestamptz - make_interval(secs => i * $3::float8), 20
	FROM generate_series($4::int, 1, -1) AS i,
	     LATERAL (SELECT cluster_id, name, allocatable_cpu_millis, allocatable_memory_bytes
	              FROM cluster_node WHERE cluster_id = $1 AND i > 0 ORDER BY name) n`

// seedDayOfHistory writes historySamples per node, ending one interval
// before the first scrape, into the hourly partitions, vacuums and analyzes
// them (as autovacuum would have), and measures their size.
func (d *discoveryEnv) seedDayOfHistory(ctx context.Context, f *fleet, res *metricsResult) error {
	end := f.base
	if _, err := d.db.Exec(ctx, `SELECT cluster_node_metrics_ensure_partitions($1, $2)`,
		end.Add(-time.Duration(historySamples)*metricsInterval), end); err != nil {
		return fmt.Errorf("create the history's partitions: %w", err)
	}
	begin := time.Now()
	tag, err := d.db.Exec(ctx, seedHistorySQL, discoveryClusterID, end, metricsInterval.Seconds(), historySamples)
	if err == nil {
		_, err = d.db.Exec(ctx, `VACUUM (ANALYZE) cluster_node_metrics`)
	}
	if err != nil {
		return fmt.Errorf("seed the history: %w", err)
	}
	if res.newHistoryRows = tag.RowsAffected(); res.newHistoryRows != int64(historySamples)*nodeCount {
		return fmt.Errorf("seeded %d samples, want %d", res.newHistoryRows, historySamples*nodeCount)
	}
	err = d.db.QueryRow(ctx, `
		SELECT coalesce(sum(pg_table_size(t.name::regclass)), 0)::int8, coalesce(sum(pg_indexes_size(t.name::regclass)), 0)::int8,
		       (SELECT count(*) FROM cluster_node_metrics)
		FROM (SELECT name FROM cluster_node_metrics_partitions()) AS t(name)`).Scan(&res.newBytes.table, &res.newBytes.indexes, &res.newBytes.rows)
	if err != nil {
		return fmt.Errorf("measure the metrics history: %w", err)
	}
	fmt.Fprintf(os.Stderr, "discovery: %d samples written, vacuumed and analyzed in %s: %s in partitions (%s table, %s indexes)\n",
		res.newHistoryRows, time.Since(begin).Round(time.Second), mibString(res.newBytes.total()), mibString(res.newBytes.table), mibString(res.newBytes.indexes))
	return nil
}

// pruneHistory is part 3: prunedHours times, MaintainNodeMetrics drops the
// oldest hourly partition (RetainAfter its upper bound). A partial first
// hour is pruned first, untimed, as is a first round that only prepares the
// coming hours' partitions.
func (d *discoveryEnv) pruneHistory(ctx context.Context, res *metricsResult) error {
	if _, err := d.registry.MaintainNodeMetrics(ctx, store.MetricsMaintenance{Now: time.Now()}); err != nil {
		return err
	}
	for res.prunedHoursMeasured < prunedHours {
		var name string
		var upper time.Time
		var rows int64
		if err := d.db.QueryRow(ctx, `SELECT name, upper_bound FROM cluster_node_metrics_partitions() ORDER BY upper_bound LIMIT 1`).Scan(&name, &upper); err != nil {
			return fmt.Errorf("find the oldest history partition: %w", err)
		}
		if err := d.db.QueryRow(ctx, `SELECT count(*) FROM `+pgx.Identifier{name}.Sanitize()).Scan(&rows); err != nil {
			return fmt.Errorf("count the samples of %s: %w", name, err)
		}
		t0 := time.Now()
		done, err := d.registry.MaintainNodeMetrics(ctx, store.MetricsMaintenance{Now: time.Now(), RetainAfter: upper})
		took := time.Since(t0)
		if err != nil {
			return err
		}
		if done.DroppedPartitions != 1 {
			return fmt.Errorf("prune before %s: dropped %d partitions, want 1 (%s with %d samples)", upper, done.DroppedPartitions, name, rows)
		}
		if rows == int64(samplesPerHour)*nodeCount {
			res.prunedRows, res.newPrune = rows, max(res.newPrune, took)
			res.prunedHoursMeasured++
		}
	}
	return nil
}

// summarize adds the quiet-fleet lines to the discovery summary.
func (r *metricsResult) summarize() {
	t := r.watchTotals()
	first := 0
	if len(r.scrapes) > 0 {
		first = r.scrapes[0].events
	}
	line := func(format string, args ...any) { summary.printf(discoverySection, format, args...) }
	matched := "MISMATCH"
	if t.exact && t.otherEvents == 0 && t.crossing > 0 && t.crossingEvents == t.crossing {
		matched = "matched"
	}
	line("metrics watch      %d scrapes after the first: %d nodes crossed the threshold, %d events of them; %d events beyond them and the period refresh; change-log rows and events = the policy's model, node for node: %s",
		t.scrapes, t.crossing, t.crossingEvents, t.otherEvents, matched)
	if usageReporting.Period == 0 {
		line("                   no report period (the default): %d refresh events in all, so none beyond the crossers", t.refreshEvents)
	} else {
		line("                   period refresh (each node at its own phase): %d–%d events a scrape, mean %.0f (nodes × interval / period = %.0f), so \"none beyond the crossers\" holds for the threshold part only",
			t.minRefreshEvents, t.maxRefreshEvents, t.meanRefreshEvents(), expectedRefresh())
	}
	perEvent := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(max(t.events, 1)) }
	line("                   (first scrape %d events; server CPU %.0f µs platform, %.0f µs kube per event after it)", first, perEvent(t.platformCPU), perEvent(t.kubeCPU))
	line("metrics write      %s per scrape of %d samples (%.0f µs/sample; %d scrapes on %d samples of history)",
		r.newWrite.Round(100*time.Microsecond), nodeCount, float64(r.newWrite.Microseconds())/nodeCount, r.ops, r.newHistoryRows)
	ops := "no quiet scrape"
	if r.quietOps > 0 {
		ops = fmt.Sprintf("%d quiet scrapes %s each", r.quietOps, r.newQuietWrite.Round(100*time.Microsecond))
	}
	var nodes int64
	if n := len(r.reportingOps); n > 0 {
		lo, hi, slowest := r.reportingOps[0].reported, r.reportingOps[0].reported, time.Duration(0)
		for _, op := range r.reportingOps {
			lo, hi, nodes, slowest = min(lo, op.reported), max(hi, op.reported), nodes+op.reported, max(slowest, op.took)
		}
		ops += fmt.Sprintf("; %d scrapes reporting %d–%d nodes (mean %d), slowest %s", n, lo, hi, nodes/int64(n), slowest.Round(100*time.Microsecond))
	}
	line("                   (of which %s)", ops)
	if r.quietRefOps > 0 {
		// The loop's mean less the quiet reference's, per reported node.
		var perNode time.Duration
		if r.ops > 0 && nodes > 0 {
			perNode = (r.newWrite - r.quietRefWrite) * time.Duration(r.ops) / time.Duration(nodes)
		}
		line("                   (quiet reference, %d scrapes with no node due: %s each; the period refresh costs %s per reported node)",
			r.quietRefOps, r.quietRefWrite.Round(100*time.Microsecond), perNode.Round(time.Microsecond))
	}
	line("metrics history    %s for a day of %d nodes (%.0f bytes/sample); prune of an hour (%d samples) %s",
		mibString(r.newBytes.total()), nodeCount, r.newBytesPerSample(), r.prunedRows, r.newPrune.Round(100*time.Microsecond))
}

// memberFence is the fence the server's discovery holds the member with:
// the benchmark writes the scraper's samples as that writer would.
func (d *discoveryEnv) memberFence(ctx context.Context) (store.Fence, error) {
	f := store.Fence{ClusterID: discoveryClusterID}
	err := d.db.QueryRow(ctx, `SELECT coalesce((SELECT epoch FROM discovery_member WHERE cluster_id = $1), 0),
		(SELECT failovers FROM registry_epoch LIMIT 1)`, discoveryClusterID).Scan(&f.Epoch, &f.Failovers)
	return f, err
}
