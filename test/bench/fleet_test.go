package bench

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	goruntime "runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/example/platform-apiserver/test/framework"
)

const (
	// fleetSyncTimeout bounds the initial sync (and each replica's /readyz)
	// per fleetSyncTimeoutNodes NodeCapacities; the rows are counted every
	// fleetSyncPoll.
	fleetSyncTimeout      = 15 * time.Minute
	fleetSyncTimeoutNodes = 100_000
	fleetSyncPoll         = time.Second
	// fleetWarmup (one metrics interval) follows the sync; the steady
	// window lasts at least -fleet-steady.
	fleetWarmup = 30 * time.Second
	// An op is fleetChangesPerOp node label changes, one after the other,
	// each awaited under every member's id, polled every fleetFreshnessPoll.
	fleetChangesPerOp  = 10
	fleetChangeTimeout = 2 * time.Minute
	fleetFreshnessPoll = 10 * time.Millisecond
	fleetLabel         = "bench.platform.example.io/fleet-seq"
	// Background churn from the end of the sync: fleetChurnRate namespace
	// relabels a second, round robin over fleetChurnNamespaces.
	fleetChurnRate       = 10
	fleetChurnNamespaces = 100
	fleetRSSSample       = 2 * time.Second
	// fleetTopStatements is how many statements the summary lists per
	// phase, by PostgreSQL's time in them.
	fleetTopStatements = 12
	// maxKiBPerNode is the goal: server RSS per mirrored node.
	maxKiBPerNode = 100
	// fleetLeasePrefix starts the discovery Leases' names.
	fleetLeasePrefix = "platform-apiserver-discovery"
	// fleetHostingID is the hosting cluster's id (leader election needs it
	// for its Leases); the other members are kubeconfig files in the member
	// directory.
	fleetHostingID = "fleet-00"
	// fleetPodsPerNode pods a node, in namespaces of podsPerSyncNamespace.
	fleetPodsPerNode = 4
	fleetMaxNodes    = 99_999 // nodeName's five digits
	// fleetMetricsCoverage of the nodes must have NodeMetrics before the runs.
	fleetMetricsCoverage = 0.99
	// metrics-server's defaults instead of the framework's 10s/5s: it
	// scrapes every node at once, and kwok answers only part of such a
	// burst of 5,000 within 5s on two cores.
	fleetMetricResolution = 60 * time.Second
	fleetKubeletTimeout   = 50 * time.Second
	// fleetKwokConfig gives kwok's node and pod stages 16 workers instead of 4.
	fleetKwokConfig = `
---
apiVersion: config.kwok.x-k8s.io/v1alpha1
kind: KwokConfiguration
options:
  nodePlayStageParallelism: 16
  podPlayStageParallelism: 16
`
)

var (
	fleetScaleFlag = flag.String("fleet-scale", "20x5000",
		"BenchmarkFleet: MEMBERSxNODES, one kwok cluster of NODES nodes (4 pods each) registered under MEMBERS cluster ids")
	fleetReplicasFlag = flag.String("fleet-replicas", "1,3",
		"BenchmarkFleet: the replica counts to run, comma-separated, each on a database of its own")
	fleetMaxRelists = flag.Int("fleet-max-relists", 0,
		"BenchmarkFleet: each replica's --discovery-max-concurrent-relists (0: the server's default)")
	fleetExtraArgs = flag.String("fleet-args", "",
		"BenchmarkFleet: more flags for each replica, space-separated (e.g. \"--discovery-batch-size=250\")")
	fleetSteadyMin = flag.Duration("fleet-steady", time.Minute,
		"BenchmarkFleet: the least length of the steady window (two scrapes of every member at the default; several minutes to see members' data age, whose heartbeat is recorded once a minute)")
	fleetPGSettings = flag.String("fleet-pg-settings", "",
		"BenchmarkFleet: more PostgreSQL settings, space-separated, after the benchmark's own (e.g. \"log_lock_waits=on deadlock_timeout=100ms\")")
)

// fleetScale is the simulated fleet's size (-fleet-scale).
type fleetScale struct{ members, nodes int }

func parseFleetScale(s string) (fleetScale, error) {
	m, n, ok := strings.Cut(s, "x")
	members, err1 := strconv.Atoi(m)
	nodes, err2 := strconv.Atoi(n)
	if !ok || err1 != nil || err2 != nil || members < 1 || nodes > fleetMaxNodes || nodes*fleetPodsPerNode < podsPerSyncNamespace*fleetChurnNamespaces {
		return fleetScale{}, fmt.Errorf("-fleet-scale=%q: want MEMBERSxNODES with at least 1 member and %d to %d nodes, e.g. 20x5000",
			s, podsPerSyncNamespace*fleetChurnNamespaces/fleetPodsPerNode, fleetMaxNodes)
	}
	return fleetScale{members, nodes}, nil
}

func parseFleetReplicas(s string) ([]int, error) {
	var out []int
	for p := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(p))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("-fleet-replicas=%q: want replica counts of at least 1, comma-separated, e.g. 1,3", s)
		}
		out = append(out, n)
	}
	return out, nil
}

// mirrored is the NodeCapacities of a complete mirror.
func (s fleetScale) mirrored() int { return s.members * s.nodes }
func (s fleetScale) pods() int     { return s.nodes * fleetPodsPerNode }

// namespaces holds the pods, syncPod's layout.
func (s fleetScale) namespaces() int { return s.pods() / podsPerSyncNamespace }

// syncTimeout is fleetSyncTimeout scaled to the fleet, never less.
func (s fleetScale) syncTimeout() time.Duration {
	return max(fleetSyncTimeout, fleetSyncTimeout*time.Duration(s.mirrored())/fleetSyncTimeoutNodes)
}

// BenchmarkFleet mirrors -fleet-scale's copies of one kwok-simulated cluster
// with each of -fleet-replicas' replica counts, each on a database of its
// own: the initial sync (untimed, reported), ops of node changes awaited
// under every cluster id while scrapers and churn run, then the steady
// state's memory, CPU, locks and database size. See docs/benchmarks.md,
// "Fleet".
func BenchmarkFleet(b *testing.B) {
	replicas, err := parseFleetReplicas(*fleetReplicasFlag)
	must(b, err)
	f := startFleetEnv(b)
	for _, n := range replicas {
		if !b.Run(fmt.Sprintf("replicas=%d", n), func(b *testing.B) { f.bench(b, n) }) {
			break
		}
	}
	f.summarize()
}

// fleetResult is what one sub-benchmark measured.
type fleetResult struct {
	replicas    int
	scale       fleetScale
	sync        time.Duration // from the start until every member was mirrored
	fresh       percentiles
	freshMissed int // member rows that did not show a change within fleetChangeTimeout
	// dataAge is every member's data age (now minus its mirror
	// heartbeat), sampled every fleetDataAgeStep in the steady window;
	// noHeartbeat counts samples of members without one.
	dataAge                percentiles
	noHeartbeat            int
	syncLocks, steadyLocks lockStats
	dbBytes                int64
	tables                 []namedBytes // the largest tables, partitions summed into their parent
	relations              []namedBytes // the largest tables' live rows, heap, TOAST and indexes
	changeLog              []changeLogShare
	changedFields          []changedField
	namespaceReports       namespaceReports
	// leases are the replicas' writes of discovery Leases
	// (platform_discovery_lease_writes_total, summed).
	leases     leaseWrites
	perReplica []fleetReplicaResult
	// syncCores and steadyCores are the cores used on average from the
	// replicas' start until synced, and in the steady window.
	syncCores, steadyCores cpuShares
	// syncStatements and steadyStatements are the statements PostgreSQL
	// spent the most time in, in the sync and in the steady window.
	syncStatements, steadyStatements []statementTime
	// syncWork is what the replicas did until synced; timeline samples
	// the sync every fleetTimelineStep.
	syncWork syncWork
	timeline []timelinePoint
}

// syncWork sums counters of the replicas' discovery and registry metrics
// from their start until synced: the same fleet should take the same work
// whatever the number of replicas, so a difference is work redone.
type syncWork struct {
	relists, events, batches, usageReports float64
	// errorsBy are discovery's errors by reason, failuresBy the registry's
	// failed writes by operation.
	errorsBy, failuresBy map[string]float64
}

func (r *fleetRun) syncWork(ctx context.Context) (syncWork, error) {
	w := syncWork{errorsBy: map[string]float64{}, failuresBy: map[string]float64{}}
	for _, rep := range r.replicas {
		body, err := rep.Metrics(ctx)
		if err != nil {
			return w, err
		}
		for _, by := range []struct {
			into        map[string]float64
			name, label string
		}{
			{w.errorsBy, "platform_discovery_errors_total", "reason"}, {w.failuresBy, "platform_registry_write_failures_total", "op"},
		} {
			sums, err := framework.MetricSumBy(body, by.name, by.label)
			if err != nil {
				return w, err
			}
			for k, v := range sums {
				by.into[k] += v
			}
		}
		for _, c := range []struct {
			into *float64
			name string
		}{
			{&w.relists, "platform_discovery_relists_total"}, {&w.events, "platform_discovery_events_applied_total"},
			{&w.batches, "platform_discovery_apply_duration_seconds_count"}, {&w.usageReports, "platform_discovery_usage_reports_total"},
		} {
			v, err := framework.MetricSum(body, c.name)
			if err != nil {
				return w, err
			}
			*c.into += v
		}
	}
	return w, nil
}

func (w syncWork) String() string {
	return fmt.Sprintf("%.0f relists, %.0f events or relisted objects applied in %.0f batches, %.0f usage reports, %.0f failed writes%s, %.0f discovery errors%s",
		w.relists, w.events, w.batches, w.usageReports, total(w.failuresBy), countsBy(w.failuresBy), total(w.errorsBy), countsBy(w.errorsBy))
}

// total sums the counts.
func total(m map[string]float64) float64 {
	t := 0.0
	for _, v := range m {
		t += v
	}
	return t
}

// countsBy lists the nonzero counts, largest first, as " (key n, ...)".
func countsBy(m map[string]float64) string {
	keys := slices.Collect(maps.Keys(m))
	keys = slices.DeleteFunc(keys, func(k string) bool { return m[k] == 0 })
	if len(keys) == 0 {
		return ""
	}
	slices.SortFunc(keys, func(a, b string) int { return cmp.Or(cmp.Compare(m[b], m[a]), cmp.Compare(a, b)) })
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %.0f", k, m[k])
	}
	return " (" + strings.Join(parts, ", ") + ")"
}

// fleetTimelineStep is the sync timeline's sampling period.
const fleetTimelineStep = 10 * time.Second

// sqlRowsInserted reads the NodeCapacities and pods inserted so far from
// PostgreSQL's statistics: a relist's chunks show there as they commit,
// while ClusterCapacity counts them only at its last batch, and counting the
// rows themselves is what the sync poll stopped doing (run R).
const sqlRowsInserted = `SELECT coalesce(sum(n_tup_ins) FILTER (WHERE relname = 'cluster_node'), 0)::bigint,
	coalesce(sum(n_tup_ins) FILTER (WHERE relname = 'cluster_pod'), 0)::bigint
	FROM pg_stat_user_tables WHERE relname IN ('cluster_node', 'cluster_pod')`

// timelinePoint is the registry's progress at one moment of the sync, and
// the cores used since the previous point.
type timelinePoint struct {
	at                    time.Duration
	nodes, pods, complete int64 // nodes and pods inserted, members complete
	cores                 cpuShares
}

func timelineString(points []timelinePoint) string {
	parts := make([]string, len(points))
	for i, p := range points {
		parts[i] = fmt.Sprintf("%.0fs %dk/%dk/%d %.2f/%.2f", p.at.Seconds(), p.nodes/1000, p.pods/1000, p.complete, p.cores.machine, p.cores.postgres)
	}
	return strings.Join(parts, ", ")
}

// statementTime is a statement's share of PostgreSQL's time in a phase
// (pg_stat_statements, nested statements tracked: a trigger's statements
// count in their own row and in the statement that fired them).
type statementTime struct {
	query string
	calls int64
	total time.Duration
}

// resetStatements starts a phase of pg_stat_statements in the run's database.
func (r *fleetRun) resetStatements(ctx context.Context) error {
	_, err := r.pool.Exec(ctx, `SELECT pg_stat_statements_reset(0, (SELECT oid FROM pg_database WHERE datname = current_database()), 0)`)
	return err
}

// topStatements are the n statements of the run's database with the most
// execution time since resetStatements.
func (r *fleetRun) topStatements(ctx context.Context, n int) ([]statementTime, error) {
	rows, _ := r.pool.Query(ctx, `SELECT left(regexp_replace(query, '\s+', ' ', 'g'), 160), calls, total_exec_time
		FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
		ORDER BY total_exec_time DESC LIMIT $1`, n)
	var out []statementTime
	var st statementTime
	var ms float64
	_, err := pgx.ForEachRow(rows, []any{&st.query, &st.calls, &ms}, func() error {
		st.total = time.Duration(ms * float64(time.Millisecond))
		out = append(out, st)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read pg_stat_statements: %w", err)
	}
	return out, nil
}

// cpuShares are cores used on average: by PostgreSQL (every process of the
// server), by the replicas, and by the whole machine (those two, and
// kube-apiserver, etcd, kwok, metrics-server and this benchmark).
type cpuShares struct{ postgres, platform, machine float64 }

// cpuSnapshot is the CPU time used so far by each part of cpuShares, the
// replicas' one by one.
type cpuSnapshot struct {
	at                time.Time
	postgres, machine time.Duration
	replicas          []time.Duration
}

func (r *fleetRun) cpuSnapshot() cpuSnapshot {
	s := r.machineSnapshot()
	s.replicas = r.cpuTimes()
	return s
}

// machineSnapshot is a cpuSnapshot without the replicas, which may be
// starting.
func (r *fleetRun) machineSnapshot() cpuSnapshot {
	s := cpuSnapshot{at: time.Now(), postgres: serverCPUTime(r.f.pg.Pids())}
	s.machine, _ = machineBusyTime()
	return s
}

// platform is the replicas' CPU time summed.
func (s cpuSnapshot) platform() time.Duration {
	var sum time.Duration
	for _, t := range s.replicas {
		sum += t
	}
	return sum
}

// coresUntil is the cores used on average from s to later.
func (s cpuSnapshot) coresUntil(later cpuSnapshot) cpuShares {
	wall := later.at.Sub(s.at).Seconds()
	return cpuShares{postgres: (later.postgres - s.postgres).Seconds() / wall,
		platform: (later.platform() - s.platform()).Seconds() / wall, machine: (later.machine - s.machine).Seconds() / wall}
}

type fleetReplicaResult struct {
	name           string
	members        int     // platform_discovery_members
	claims         float64 // platform_discovery_member_claims_total
	hwm, rssSteady int64   // VmHWM at the end, mean VmRSS over the steady window
	cores          float64
}

// mirroredNodes is how many NodeCapacities the replica mirrors.
func (r fleetReplicaResult) mirroredNodes(s fleetScale) int { return r.members * s.nodes }

// fleetRun is one sub-benchmark's replicas and database.
type fleetRun struct {
	f        *fleetEnv
	dsn      string
	pool     *pgxpool.Pool
	replicas []*framework.FleetReplica
	ids      []string
}

func (f *fleetEnv) bench(b *testing.B, n int) {
	ctx := b.Context()
	res := fleetResult{replicas: n, scale: f.scale}
	run, err := f.newRun(ctx, fmt.Sprintf("platform_fleet_r%d", n))
	must(b, err)
	defer func() {
		if err := run.close(); err != nil {
			b.Errorf("stop the replicas: %v", err)
		}
	}()
	syncBegin := run.cpuSnapshot() // no replica yet
	must(b, run.resetStatements(ctx))
	res.sync, res.timeline, err = run.startAndSync(ctx, n)
	must(b, err)
	res.syncWork, err = run.syncWork(ctx)
	must(b, err)
	res.syncCores = syncBegin.coresUntil(run.cpuSnapshot())
	res.syncStatements, err = run.topStatements(ctx, fleetTopStatements)
	must(b, err)
	fmt.Fprintf(os.Stderr, "fleet: %d replica(s) mirrored %d members in %s\n", n, f.scale.members, res.sync.Round(100*time.Millisecond))
	syncLocks, err := run.lockSnapshots(ctx)
	must(b, err)
	res.syncLocks = newLockStats(nil, syncLocks, res.sync)
	syncLeases, err := run.leaseCounts(ctx)
	must(b, err)
	must(b, run.checkObjects(ctx))

	// Steady state: churn, scrapers, and the freshness loop.
	churnCtx, stopChurn := context.WithCancel(ctx)
	defer stopChurn()
	churnDone := make(chan struct{})
	go func() { f.churn(churnCtx); close(churnDone) }()
	must(b, sleepCtx(ctx, fleetWarmup))
	steadyBegin := time.Now()
	stopSampling := run.sampleRSS(ctx)
	stopAges := run.sampleDataAges(ctx)
	before, err := run.lockSnapshots(ctx)
	must(b, err)
	cpuBefore := run.cpuSnapshot()
	must(b, run.resetStatements(ctx))
	leasesBefore, err := run.leaseCounts(ctx)
	must(b, err)
	fresh := loopLatencies(b, func() ([]time.Duration, error) {
		got, missed, err := f.freshnessRound(ctx, run.pool, run.ids)
		res.freshMissed += missed
		return got, err
	})
	must(b, sleepCtx(ctx, *fleetSteadyMin-time.Since(steadyBegin)))
	after, err := run.lockSnapshots(ctx)
	must(b, err)
	cpuAfter := run.cpuSnapshot()
	res.steadyCores = cpuBefore.coresUntil(cpuAfter)
	res.steadyStatements, err = run.topStatements(ctx, fleetTopStatements)
	must(b, err)
	leasesAfter, err := run.leaseCounts(ctx)
	must(b, err)
	steadyWindow := time.Since(steadyBegin)
	res.leases = leaseWrites{
		syncMember: syncLeases.member, syncPresence: syncLeases.presence,
		steadyMemberPerSec:   (leasesAfter.member - leasesBefore.member) / steadyWindow.Seconds(),
		steadyPresencePerSec: (leasesAfter.presence - leasesBefore.presence) / steadyWindow.Seconds(),
		failed:               leasesAfter.failed,
	}
	stopChurn()
	<-churnDone
	steadyRSS := stopSampling()
	ages, noHeartbeat := stopAges()
	res.dataAge, res.noHeartbeat = ages.summary(), noHeartbeat
	res.steadyLocks = newLockStats(before, after, steadyWindow)
	res.fresh = fresh.summary()

	// Who mirrors what, memory, database.
	for i, r := range run.replicas {
		body, err := r.Metrics(ctx)
		must(b, err)
		members, _ := framework.MetricSum(body, "platform_discovery_members")
		claims, _ := framework.MetricSum(body, "platform_discovery_member_claims_total")
		_, hwm, _ := processMemory(r.PID())
		res.perReplica = append(res.perReplica, fleetReplicaResult{name: r.Name(), members: int(members), claims: claims,
			hwm: hwm, rssSteady: steadyRSS[i], cores: float64(cpuAfter.replicas[i]-cpuBefore.replicas[i]) / float64(steadyWindow)})
		if *profileDir != "" {
			heap, err := r.Get(ctx, "/debug/pprof/heap")
			if err := writeProfile(r.Name()+".heap.pprof", heap, err); err != nil {
				b.Error(err)
			}
		}
	}
	must(b, run.pool.QueryRow(ctx, `SELECT pg_database_size(current_database())`).Scan(&res.dbBytes))
	res.tables, err = largestTables(ctx, run.pool, 8)
	must(b, err)
	res.relations, err = relationsOf(ctx, run.pool, "cluster_node", "registry_change", "cluster_namespace")
	must(b, err)
	res.changeLog, err = changeLogShares(ctx, run.pool)
	must(b, err)
	res.changedFields, err = changedFields(ctx, run.pool)
	must(b, err)
	res.namespaceReports, err = namespaceReportShares(ctx, run.pool)
	must(b, err)
	res.report(b)
	f.results = append(f.results, res)
	if res.freshMissed > 0 {
		b.Errorf("%d member rows did not show their change within %s", res.freshMissed, fleetChangeTimeout)
	}
}

// fleetDataAgeStep is how often the steady window samples every member's
// data age.
const fleetDataAgeStep = 10 * time.Second

// sampleDataAges samples every member's data age (now minus its mirror
// heartbeat, ClusterCapacity status.mirroring.completeAsOf, as readers
// judge it) every fleetDataAgeStep until stop, which returns them and how
// many samples found a member without a heartbeat.
func (r *fleetRun) sampleDataAges(ctx context.Context) (stop func() (*latencies, int)) {
	ctx, cancel := context.WithCancel(ctx)
	var ages latencies
	missing := 0
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			rows, err := r.pool.Query(ctx, `SELECT (extract(epoch FROM now() - c.complete_as_of) * 1e9)::bigint
				FROM unnest($1::text[]) m(id) LEFT JOIN cluster_capacity c ON c.cluster_id = m.id`, r.ids)
			if err == nil {
				ns, err := pgx.CollectRows(rows, pgx.RowTo[*int64])
				if err == nil {
					for _, n := range ns {
						if n == nil {
							missing++
							continue
						}
						ages.add(time.Duration(*n))
					}
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(fleetDataAgeStep):
			}
		}
	}()
	return func() (*latencies, int) {
		cancel()
		<-done
		return &ages, missing
	}
}

// namedBytes is the size of a table (with its indexes and TOAST) or of one
// of its relations.
type namedBytes struct {
	name  string
	bytes int64
}

// collectNamedBytes reads rows of (name, bytes).
func collectNamedBytes(rows pgx.Rows) ([]namedBytes, error) {
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (namedBytes, error) {
		var t namedBytes
		return t, row.Scan(&t.name, &t.bytes)
	})
}

// perNode lists sizes as bytes per node of a fleet of nodes.
func perNode(sizes []namedBytes, nodes float64) string {
	parts := make([]string, 0, len(sizes))
	for _, t := range sizes {
		parts = append(parts, fmt.Sprintf("%s %.0f", t.name, float64(t.bytes)/nodes))
	}
	return strings.Join(parts, ", ")
}

// largestTables returns the n largest tables of the database, a partitioned
// table's partitions summed into it.
func largestTables(ctx context.Context, pool *pgxpool.Pool, n int) ([]namedBytes, error) {
	rows, err := pool.Query(ctx, `SELECT coalesce(pg_partition_root(c.oid), c.oid)::regclass::text, sum(pg_total_relation_size(c.oid))::bigint
		FROM pg_class c JOIN pg_namespace ns ON ns.oid = c.relnamespace
		WHERE ns.nspname = current_schema() AND c.relkind = 'r'
		GROUP BY 1 ORDER BY 2 DESC LIMIT $1`, n)
	if err != nil {
		return nil, fmt.Errorf("table sizes: %w", err)
	}
	return collectNamedBytes(rows)
}

// relationsOf breaks each table down into the bytes of its live rows, its
// heap file (live rows, dead ones and free space), its TOAST and each index:
// what a table's bytes per node are made of.
func relationsOf(ctx context.Context, pool *pgxpool.Pool, tables ...string) ([]namedBytes, error) {
	var out []namedBytes
	for _, table := range tables {
		var live, heap, toast int64
		err := pool.QueryRow(ctx, fmt.Sprintf(`SELECT coalesce(sum(pg_column_size(t.*)), 0)::bigint, pg_relation_size(%[1]s),
				pg_total_relation_size(%[1]s) - pg_relation_size(%[1]s) - pg_indexes_size(%[1]s) FROM %[2]s t`,
			"'"+table+"'::regclass", pgx.Identifier{table}.Sanitize())).Scan(&live, &heap, &toast)
		if err != nil {
			return nil, fmt.Errorf("%s: heap and TOAST: %w", table, err)
		}
		out = append(out, namedBytes{table + " live", live}, namedBytes{table + " heap", heap}, namedBytes{table + " toast", toast})
		rows, err := pool.Query(ctx, `SELECT indexrelid::regclass::text, pg_relation_size(indexrelid) FROM pg_index
			WHERE indrelid = $1::regclass ORDER BY 2 DESC`, table)
		if err != nil {
			return nil, fmt.Errorf("%s: indexes: %w", table, err)
		}
		indexes, err := collectNamedBytes(rows)
		if err != nil {
			return nil, fmt.Errorf("%s: indexes: %w", table, err)
		}
		out = append(out, indexes...)
	}
	return out, nil
}

// changeLogShare is what one kind and type of change-log entry holds.
type changeLogShare struct {
	kind, typ  string
	entries    int64
	imageBytes int64 // pg_column_size of what each entry keeps of the state before (delta or image): as stored, compressed or not
	compressed int64 // entries whose delta or image PostgreSQL stored compressed
}

// changeLogShares breaks the change log down by kind and type, largest
// first: which entries the log's bytes per node are made of.
func changeLogShares(ctx context.Context, pool *pgxpool.Pool) ([]changeLogShare, error) {
	rows, err := pool.Query(ctx, `SELECT kind, type, count(*), coalesce(sum(pg_column_size(coalesce(prev_delta, prev_object))), 0)::bigint,
			count(*) FILTER (WHERE pg_column_compression(coalesce(prev_delta, prev_object)) IS NOT NULL)
		FROM registry_change GROUP BY 1, 2 ORDER BY 4 DESC`)
	if err != nil {
		return nil, fmt.Errorf("change log by kind and type: %w", err)
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (changeLogShare, error) {
		var c changeLogShare
		return c, row.Scan(&c.kind, &c.typ, &c.entries, &c.imageBytes, &c.compressed)
	})
}

// modifiedNamespaces is every MODIFIED ClusterNamespace entry of the change
// log with its state before (prev) and after (obj), as the reader builds
// them (docs/registry.md, "Change feed"): the state after is the last state
// of the row's next deletion or its live row, with the deltas of the row's
// later entries laid over; the state before is that with the entry's own
// delta laid over.
const modifiedNamespaces = `modified AS (
		SELECT a.obj || c.prev_delta AS prev, a.obj
		FROM registry_change c CROSS JOIN LATERAL (
			WITH RECURSIVE later AS (
				SELECT n.resource_version, n.type, n.prev_delta, n.prev_object FROM registry_change n WHERE n.prev_rv = c.resource_version
				UNION ALL
				SELECT n.resource_version, n.type, n.prev_delta, n.prev_object FROM later l
				JOIN registry_change n ON n.prev_rv = l.resource_version WHERE l.type = 'MODIFIED'
			), last AS (SELECT * FROM later ORDER BY resource_version DESC LIMIT 1)
			SELECT CASE WHEN (SELECT type FROM last) = 'DELETED' THEN (SELECT prev_object FROM last)
				ELSE (SELECT to_jsonb(l) FROM cluster_namespace l WHERE l.cluster_id = c.cluster_id AND l.name = c.name
					AND l.resource_version = coalesce((SELECT resource_version FROM last), c.resource_version)) END
				|| coalesce((SELECT jsonb_object_agg(d.key, d.value) FROM (SELECT DISTINCT ON (e.key) e.key, e.value
					FROM later, jsonb_each(later.prev_delta) e ORDER BY e.key, later.resource_version) d), '{}') AS obj) a
		WHERE c.type = 'MODIFIED' AND c.kind = 'ClusterNamespace')`

// changedField counts the MODIFIED entries of one kind whose states before
// and after differ in one field: what makes a row change.
type changedField struct {
	kind, field string
	entries     int64
}

// changedFields says which fields the log's MODIFIED entries changed, most
// often first: the keys of their deltas, which hold exactly the columns
// that differ but resource_version (migration 022).
func changedFields(ctx context.Context, pool *pgxpool.Pool) ([]changedField, error) {
	rows, err := pool.Query(ctx, `SELECT c.kind, k.key, count(*)
		FROM registry_change c, jsonb_object_keys(c.prev_delta) k(key)
		WHERE c.type = 'MODIFIED'
		GROUP BY 1, 2 ORDER BY 3 DESC LIMIT 16`)
	if err != nil {
		return nil, fmt.Errorf("changed fields of the change log: %w", err)
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (changedField, error) {
		var c changedField
		return c, row.Scan(&c.kind, &c.field, &c.entries)
	})
}

// namespaceReports says why the log's ClusterNamespace usage changes came:
// a first report, the pods measured changed (and by how much, relative to
// the reported ones), or CPU or memory alone moved.
type namespaceReports struct {
	first, pods, usageOnly, unknown int64
	podsRelP50, podsRelP90          float64
}

func namespaceReportShares(ctx context.Context, pool *pgxpool.Pool) (namespaceReports, error) {
	var r namespaceReports
	err := pool.QueryRow(ctx, `WITH `+modifiedNamespaces+`, c AS (
			SELECT (obj->>'usage_pods')::float8 AS pods, (prev->>'usage_pods')::float8 AS prev_pods
			FROM modified
			WHERE obj->'usage_observed_at' IS DISTINCT FROM prev->'usage_observed_at')
		SELECT count(*) FILTER (WHERE prev_pods IS NULL AND pods IS NOT NULL),
			count(*) FILTER (WHERE pods <> prev_pods),
			count(*) FILTER (WHERE pods = prev_pods),
			count(*) FILTER (WHERE pods IS NULL),
			coalesce(percentile_cont(0.5) WITHIN GROUP (ORDER BY abs(pods - prev_pods) / prev_pods) FILTER (WHERE pods <> prev_pods), 0),
			coalesce(percentile_cont(0.9) WITHIN GROUP (ORDER BY abs(pods - prev_pods) / prev_pods) FILTER (WHERE pods <> prev_pods), 0)
		FROM c`).Scan(&r.first, &r.pods, &r.usageOnly, &r.unknown, &r.podsRelP50, &r.podsRelP90)
	if err != nil {
		return r, fmt.Errorf("namespace usage reports in the change log: %w", err)
	}
	return r, nil
}

// newRun creates the sub-benchmark's database (dropping a leftover), deletes
// earlier replicas' discovery Leases (so each starts as a fresh deployment),
// migrates the database with the server's own `migrate` and connects to it.
func (f *fleetEnv) newRun(ctx context.Context, db string) (*fleetRun, error) {
	ident := pgx.Identifier{db}.Sanitize()
	for _, stmt := range []string{`DROP DATABASE IF EXISTS ` + ident + ` WITH (FORCE)`, `CREATE DATABASE ` + ident} {
		if _, err := f.db.Exec(ctx, stmt); err != nil {
			return nil, fmt.Errorf("%s: %w", stmt, err)
		}
	}
	leases := f.kube.CoordinationV1().Leases("kube-system")
	list, err := leases.List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list Leases: %w", err)
	}
	for _, l := range list.Items {
		if strings.HasPrefix(l.Name, fleetLeasePrefix) {
			if err := leases.Delete(ctx, l.Name, metav1.DeleteOptions{}); err != nil {
				return nil, fmt.Errorf("delete Lease %s: %w", l.Name, err)
			}
		}
	}
	dsn := f.pg.DSN()
	i := strings.Index(dsn, "/postgres?")
	if i < 0 {
		return nil, fmt.Errorf("unexpected DSN shape %q", dsn)
	}
	dsn = dsn[:i] + "/" + db + dsn[i+len("/postgres"):]
	if err := f.cp.MigratePlatformDatabase(ctx, dsn); err != nil {
		return nil, err
	}
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", db, err)
	}
	if _, err := pool.Exec(ctx, `CREATE EXTENSION IF NOT EXISTS pg_stat_statements`); err != nil {
		pool.Close()
		return nil, fmt.Errorf("pg_stat_statements in %s: %w", db, err)
	}
	run := &fleetRun{f: f, dsn: dsn, pool: pool}
	for i := range f.scale.members {
		run.ids = append(run.ids, fleetMemberID(i))
	}
	return run, nil
}

// close stops the replicas gracefully (releasing their Leases) and the pool.
func (r *fleetRun) close() error {
	var wg sync.WaitGroup
	errs := make([]error, len(r.replicas))
	for i, rep := range r.replicas {
		wg.Go(func() { errs[i] = rep.Stop() })
	}
	wg.Wait()
	r.pool.Close()
	return errors.Join(errs...)
}

// startAndSync starts n replicas at once and polls the registry until every
// member's rows are complete, returning the time since the first start;
// then it waits until every replica is ready. Started replicas are in
// r.replicas, sorted by name.
func (r *fleetRun) startAndSync(ctx context.Context, n int) (time.Duration, []timelinePoint, error) {
	startCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var mu sync.Mutex
	var starts sync.WaitGroup
	startErrs := make(chan error, n)
	defer func() {
		cancel()
		starts.Wait()
		slices.SortFunc(r.replicas, func(a, b *framework.FleetReplica) int { return strings.Compare(a.Name(), b.Name()) })
	}()
	begin := time.Now()
	var timeline []timelinePoint
	last := r.machineSnapshot()
	for i := range n {
		starts.Go(func() {
			args := []string{"--postgres-dsn=" + r.dsn}
			if *fleetMaxRelists > 0 {
				args = append(args, fmt.Sprintf("--discovery-max-concurrent-relists=%d", *fleetMaxRelists))
			}
			rep, err := r.f.cp.StartFleetReplica(startCtx, fmt.Sprintf("platform-fleet-r%d-%d", n, i), args, r.f.scale.syncTimeout())
			mu.Lock()
			defer mu.Unlock()
			if rep != nil {
				r.replicas = append(r.replicas, rep)
			}
			if err != nil {
				startErrs <- err
			}
		})
	}
	err := pollUntil(ctx, fleetSyncPoll, r.f.scale.syncTimeout(), func(ctx context.Context) (bool, string, error) {
		select {
		case err := <-startErrs:
			return false, "", err
		default:
		}
		// The members' ClusterCapacity rows first (a row each), then, once
		// they all say complete, the rows themselves: counting every row of
		// the registry each second took 79 s of a 172 s sync in PostgreSQL's
		// executor, 166 s of a 318 s one with three replicas
		// (pg_stat_statements, docs/benchmarks.md run R).
		counts, err := capacityCountsByCluster(ctx, r.pool)
		if err == nil && r.complete(counts) == len(r.ids) {
			counts, err = registryCountsByCluster(ctx, r.pool)
		}
		var total registryCounts
		for _, id := range r.ids {
			c := counts[id]
			total = registryCounts{total.namespaces + c.namespaces, total.nodes + c.nodes, total.pods + c.pods}
		}
		complete := r.complete(counts)
		if time.Since(last.at) >= fleetTimelineStep {
			now := r.machineSnapshot()
			p := timelinePoint{at: time.Since(begin), complete: int64(complete), cores: last.coresUntil(now)}
			if err := r.pool.QueryRow(ctx, sqlRowsInserted).Scan(&p.nodes, &p.pods); err != nil {
				return false, "", fmt.Errorf("read rows inserted: %w", err)
			}
			timeline = append(timeline, p)
			last = now
		}
		return complete == len(r.ids), fmt.Sprintf("%s in the registry, %d of %d members complete", total, complete, len(r.ids)), err
	})
	if err != nil {
		return 0, timeline, fmt.Errorf("members not mirrored: %w", err)
	}
	synced := time.Since(begin)
	starts.Wait()
	select {
	case err := <-startErrs:
		return synced, timeline, err
	default:
		return synced, timeline, nil
	}
}

// complete is how many of the run's members have counts of the member
// the fleet mirrors.
func (r *fleetRun) complete(counts map[string]registryCounts) int {
	n := 0
	for _, id := range r.ids {
		if counts[id] == r.f.want {
			n++
		}
	}
	return n
}

// capacityCountsByCluster reads each member's namespaces, nodes and pods
// from its ClusterCapacity row: what the triggers summed, its pods once
// the relist's last batch stamped the namespaces' pod counts.
func capacityCountsByCluster(ctx context.Context, pool *pgxpool.Pool) (map[string]registryCounts, error) {
	return countsByCluster(ctx, pool, "read ClusterCapacity counts", `SELECT cluster_id, namespaces, nodes, pods FROM cluster_capacity`)
}

// registryCountsByCluster counts each member's namespaces, nodes and pods.
func registryCountsByCluster(ctx context.Context, pool *pgxpool.Pool) (map[string]registryCounts, error) {
	return countsByCluster(ctx, pool, "count registry rows", `
		SELECT cluster_id, sum(s), sum(n), sum(p) FROM (
			SELECT cluster_id, count(*) AS s, 0 AS n, 0 AS p FROM cluster_namespace GROUP BY cluster_id
			UNION ALL SELECT cluster_id, 0, count(*), 0 FROM cluster_node GROUP BY cluster_id
			UNION ALL SELECT cluster_id, 0, 0, count(*) FROM cluster_pod GROUP BY cluster_id) AS c
		GROUP BY cluster_id`)
}

// countsByCluster reads rows of (cluster id, namespaces, nodes, pods).
func countsByCluster(ctx context.Context, pool *pgxpool.Pool, what, sql string) (map[string]registryCounts, error) {
	rows, _ := pool.Query(ctx, sql)
	out := map[string]registryCounts{}
	var id string
	var c registryCounts
	_, err := pgx.ForEachRow(rows, []any{&id, &c.namespaces, &c.nodes, &c.pods}, func() error {
		out[id] = c
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return out, nil
}

// checkObjects checks that every member's node carries its pods' requests:
// the mirrored rows are complete objects, not only counted.
func (r *fleetRun) checkObjects(ctx context.Context) error {
	name := nodeName(r.f.scale.nodes / 2)
	rows, _ := r.pool.Query(ctx, `SELECT cluster_id, pod_count, requested_cpu_millis FROM cluster_node WHERE cluster_id = ANY($1) AND name = $2`, r.ids, name)
	var id string
	var pods, cpu int64
	n, err := pgx.ForEachRow(rows, []any{&id, &pods, &cpu}, func() error {
		if pods != fleetPodsPerNode || cpu == 0 {
			return fmt.Errorf("node %s of %s: %d pods, %dm CPU requested; want %d pods", name, id, pods, cpu, fleetPodsPerNode)
		}
		return nil
	})
	if err == nil && int(n.RowsAffected()) != len(r.ids) {
		err = fmt.Errorf("node %s under %d of %d cluster ids", name, n.RowsAffected(), len(r.ids))
	}
	return err
}

func (r *fleetRun) lockSnapshots(ctx context.Context) ([]lockSnapshot, error) {
	out := make([]lockSnapshot, len(r.replicas))
	for i, rep := range r.replicas {
		body, err := rep.Metrics(ctx)
		if err != nil {
			return nil, err
		}
		held, err := framework.MetricSum(body, "platform_registry_writer_lock_hold_seconds_sum")
		if err != nil {
			return nil, err
		}
		out[i] = lockSnapshot{histograms: [3]map[string]promHistogram{
			histogramsByOp(body, "platform_registry_writer_lock_hold_seconds"),
			histogramsByOp(body, "platform_registry_writer_lock_wait_seconds"),
			histogramsByOp(body, "platform_registry_member_lock_wait_seconds"),
		}, held: held}
	}
	return out, nil
}

// leaseCounts are the replicas' discovery Lease writes so far.
type leaseCounts struct {
	member, presence, failed float64
}

// leaseWrites are what a fleetResult reports of them: the sync's counts,
// the steady window's rates and the failures of the whole run.
type leaseWrites struct {
	syncMember, syncPresence                 float64
	steadyMemberPerSec, steadyPresencePerSec float64
	failed                                   float64
}

// leaseCounts sums the replicas' platform_discovery_lease_writes_total.
func (r *fleetRun) leaseCounts(ctx context.Context) (leaseCounts, error) {
	var w leaseCounts
	for _, rep := range r.replicas {
		body, err := rep.Metrics(ctx)
		if err != nil {
			return w, err
		}
		const name = "platform_discovery_lease_writes_total"
		member, _ := framework.MetricSum(body, name, `lease="member"`)
		presence, _ := framework.MetricSum(body, name, `lease="presence"`)
		conflicts, _ := framework.MetricSum(body, name, `result="conflict"`)
		errs, _ := framework.MetricSum(body, name, `result="error"`)
		w.member, w.presence, w.failed = w.member+member, w.presence+presence, w.failed+conflicts+errs
	}
	return w, nil
}

func (r *fleetRun) cpuTimes() []time.Duration {
	pids := make([]int, len(r.replicas))
	for i, rep := range r.replicas {
		pids[i] = rep.PID()
	}
	return cpuClock(pids...)
}

// sampleRSS samples every replica's VmRSS every fleetRSSSample until stop,
// which returns each one's mean.
func (r *fleetRun) sampleRSS(ctx context.Context) (stop func() []int64) {
	ctx, cancel := context.WithCancel(ctx)
	sums, n := make([]int64, len(r.replicas)), make([]int64, len(r.replicas))
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = every(ctx, fleetRSSSample, -1, func() error {
			for i, rep := range r.replicas {
				if rss, _, err := processMemory(rep.PID()); err == nil {
					sums[i], n[i] = sums[i]+rss, n[i]+1
				}
			}
			return nil
		})
	}()
	return func() []int64 {
		cancel()
		<-done
		for i := range sums {
			sums[i] /= max(n[i], 1)
		}
		return sums
	}
}

// churn relabels namespaces in the member until ctx ends.
func (f *fleetEnv) churn(ctx context.Context) {
	_ = every(ctx, time.Second/fleetChurnRate, -1, func() error {
		seq := f.churnSeq
		f.churnSeq++
		ns := syncNamespaceName(seq % fleetChurnNamespaces * (f.scale.namespaces() / fleetChurnNamespaces))
		_ = f.relabel(ctx, "namespaces", ns, churnLabel, strconv.Itoa(seq)) // a failed change is only one less
		return nil
	})
}

// freshnessRound labels fleetChangesPerOp nodes, one after the other, and
// returns for each change and member the time from the patch returning to
// the first poll that sees the member's row with the label, and how many
// member rows did not show it within fleetChangeTimeout (then the next
// change starts).
func (f *fleetEnv) freshnessRound(ctx context.Context, pool *pgxpool.Pool, ids []string) ([]time.Duration, int, error) {
	latencies := make([]time.Duration, 0, fleetChangesPerOp*len(ids))
	missed := 0
	for range fleetChangesPerOp {
		f.nodeSeq++
		seq := f.nodeSeq
		node, value := nodeName(seq*97%f.scale.nodes), strconv.Itoa(seq)
		if err := f.relabel(ctx, "nodes", node, fleetLabel, value); err != nil {
			return nil, missed, err
		}
		written := time.Now()
		seen := make(map[string]bool, len(ids))
		for len(seen) < len(ids) {
			asked := time.Now()
			rows, _ := pool.Query(ctx, `SELECT cluster_id FROM cluster_node WHERE cluster_id = ANY($1) AND name = $2 AND labels ->> $3 = $4`,
				ids, node, fleetLabel, value)
			got, err := pgx.CollectRows(rows, pgx.RowTo[string])
			if err != nil {
				return nil, missed, fmt.Errorf("poll node %s: %w", node, err)
			}
			for _, id := range got {
				if !seen[id] {
					seen[id] = true
					latencies = append(latencies, asked.Sub(written))
				}
			}
			if len(seen) == len(ids) {
				break
			}
			if time.Since(written) > fleetChangeTimeout {
				late := slices.DeleteFunc(slices.Clone(ids), func(id string) bool { return seen[id] })
				fmt.Fprintf(os.Stderr, "fleet: change %d (label of node %s) not mirrored under %v after %s\n", seq, node, late, fleetChangeTimeout)
				missed += len(late)
				break
			}
			if err := sleepCtx(ctx, fleetFreshnessPoll); err != nil {
				return nil, missed, err
			}
		}
		// Changes start at different phases of the members' batch delays.
		if err := sleepCtx(ctx, time.Duration(seq%5)*37*time.Millisecond); err != nil {
			return nil, missed, err
		}
	}
	return latencies, missed, nil
}

// kiBPerMirroredNode is the largest steady (or peak) RSS per mirrored node
// over the replicas that mirror any member; NaN when none does.
func (res fleetResult) kiBPerMirroredNode(peak bool) float64 {
	v := math.NaN()
	for _, r := range res.perReplica {
		if nodes := r.mirroredNodes(res.scale); nodes > 0 {
			rss := r.rssSteady
			if peak {
				rss = r.hwm
			}
			if kib := float64(rss) / 1024 / float64(nodes); math.IsNaN(v) || kib > v {
				v = kib
			}
		}
	}
	return v
}

// fleetTotals sums the replicas' memory, CPU and claims.
type fleetTotals struct {
	hwm, maxHWM, steady   int64
	cores, claims         float64
	mirroring, maxMembers int
}

func (res fleetResult) totals() fleetTotals {
	var t fleetTotals
	for _, r := range res.perReplica {
		t.hwm, t.maxHWM, t.steady = t.hwm+r.hwm, max(t.maxHWM, r.hwm), t.steady+r.rssSteady
		t.cores, t.claims = t.cores+r.cores, t.claims+r.claims
		if r.members > 0 {
			t.mirroring++
		}
		t.maxMembers = max(t.maxMembers, r.members)
	}
	return t
}

func (res fleetResult) report(b *testing.B) {
	t := res.totals()
	fleetNodes := float64(res.scale.mirrored())
	b.ReportMetric(0, "ns/op") // an op is a fixed number of changes
	b.ReportMetric(res.sync.Seconds(), "sync-s")
	b.ReportMetric(res.sync.Seconds()/(fleetNodes/1000), "sync-s/1k-nodes")
	res.fresh.report(b, "fresh-", true)
	res.dataAge.report(b, "data-age-", true)
	b.ReportMetric(float64(res.noHeartbeat), "data-age-missing")
	b.ReportMetric(float64(res.fresh.samples)/float64(b.N), "rows/op")
	b.ReportMetric(float64(res.freshMissed), "fresh-missed")
	for _, m := range []struct {
		v    float64
		unit string
	}{
		{res.syncLocks.hold, "sync-lock-hold-p99-ms"}, {res.syncLocks.wait, "sync-lock-wait-p99-ms"},
		{res.steadyLocks.hold, "lock-hold-p99-ms"}, {res.steadyLocks.wait, "lock-wait-p99-ms"},
		{res.syncLocks.memberWait, "sync-member-wait-p99-ms"}, {res.steadyLocks.memberWait, "member-wait-p99-ms"},
		{res.kiBPerMirroredNode(false), "rss-KiB/node"}, {res.kiBPerMirroredNode(true), "peak-KiB/node"},
	} {
		if !math.IsNaN(m.v) {
			if strings.HasSuffix(m.unit, "-ms") {
				m.v *= 1000
			}
			b.ReportMetric(m.v, m.unit)
		}
	}
	b.ReportMetric(res.syncLocks.busy, "sync-lock-busy")
	b.ReportMetric(res.steadyLocks.busy, "lock-busy")
	b.ReportMetric(float64(t.maxHWM)/mib, "peak-MiB")
	b.ReportMetric(float64(t.steady)/mib, "steady-MiB")
	b.ReportMetric(float64(t.hwm)/1024/fleetNodes, "fleet-peak-KiB/node")
	b.ReportMetric(t.cores, "platform-cores")
	for _, c := range []struct {
		phase  string
		shares cpuShares
	}{{"sync-", res.syncCores}, {"", res.steadyCores}} {
		b.ReportMetric(c.shares.postgres, c.phase+"pg-cores")
		b.ReportMetric(c.shares.machine, c.phase+"machine-cores")
	}
	b.ReportMetric(res.syncCores.platform, "sync-platform-cores")
	b.ReportMetric(float64(res.dbBytes)/mib, "db-MiB")
	b.ReportMetric(float64(res.dbBytes)/fleetNodes, "db-B/node")
	b.ReportMetric(t.claims, "member-claims")
	b.ReportMetric(res.leases.syncMember, "sync-member-lease-writes")
	b.ReportMetric(res.leases.steadyMemberPerSec, "member-lease-writes/s")
	b.ReportMetric(res.leases.steadyPresencePerSec, "presence-lease-writes/s")
	b.ReportMetric(res.leases.failed, "lease-writes-failed")
	b.ReportMetric(float64(t.mirroring), "mirroring-replicas")
	b.ReportMetric(float64(t.maxMembers), "max-members")
}

// summarize adds one block per sub-benchmark to the summary, against the goal.
func (f *fleetEnv) summarize() {
	fleetNodes := float64(f.scale.mirrored())
	section := fmt.Sprintf("fleet summary (%d members × %d kwok nodes, %d pods, %d namespaces = %.0f NodeCapacities; replicas %s; goal: ≤ %d KiB server RSS per mirrored node)",
		f.scale.members, f.scale.nodes, f.want.pods, f.want.namespaces, fleetNodes, *fleetReplicasFlag, maxKiBPerNode)
	line := func(format string, args ...any) { summary.printf(section, format, args...) }
	const columns = "%-8s %9s %11s %22s %19s %19s %9s %9s %10s"
	line(columns, "replicas", "sync", "s/1k nodes", "fresh p50/p99/max", "lock hold p99", "lock wait p99", "DB", "DB B/node", "cores")
	line(columns, "", "", "", "(ms, per member row)", "sync / steady", "sync / steady", "", "", "(steady)")
	for _, res := range f.results {
		line("%-8d %8.1fs %11.2f %22s %19s %19s %9s %9.0f %10.2f",
			res.replicas, res.sync.Seconds(), res.sync.Seconds()/(fleetNodes/1000),
			fmt.Sprintf("%.0f / %.0f / %.0f", ms(res.fresh.p50), ms(res.fresh.p99), ms(res.fresh.max)),
			secondsString(res.syncLocks.hold)+" / "+secondsString(res.steadyLocks.hold),
			secondsString(res.syncLocks.wait)+" / "+secondsString(res.steadyLocks.wait),
			mibString(res.dbBytes), float64(res.dbBytes)/fleetNodes, res.totals().cores)
	}
	for _, res := range f.results {
		t := res.totals()
		line("%d replica(s): member claims %.0f (%d = each member claimed once, never moved)", res.replicas, t.claims, f.scale.members)
		line("  Lease writes: member %.0f and presence %.0f until synced; steady %.2f/s member, %.2f/s presence; %.0f failed or conflicted in all",
			res.leases.syncMember, res.leases.syncPresence, res.leases.steadyMemberPerSec, res.leases.steadyPresencePerSec, res.leases.failed)
		if res.freshMissed > 0 {
			line("  %d member rows did not show their change within %s (not in the percentiles)", res.freshMissed, fleetChangeTimeout)
		}
		line("  members' data age (now minus the mirror heartbeat, every member every %s in the steady window): p50 %.1f s, p99 %.1f s, max %.1f s over %d samples; %d samples without a heartbeat",
			fleetDataAgeStep, res.dataAge.p50.Seconds(), res.dataAge.p99.Seconds(), res.dataAge.max.Seconds(), res.dataAge.samples, res.noHeartbeat)
		for _, r := range res.perReplica {
			l := fmt.Sprintf("  %-22s %2d members  VmHWM %8s  VmRSS steady %8s", r.name, r.members, mibString(r.hwm), mibString(r.rssSteady))
			if nodes := r.mirroredNodes(f.scale); nodes > 0 {
				steady, peak := float64(r.rssSteady)/1024/float64(nodes), float64(r.hwm)/1024/float64(nodes)
				l += fmt.Sprintf("  %6.2f KiB/mirrored node steady, %6.2f peak: %s", steady, peak, verdict(peak <= maxKiBPerNode))
			} else {
				l += "  mirrors no member"
			}
			line("%s", l)
		}
		line("  until synced: %s", res.syncWork)
		line("  sync every %s (elapsed nodes/pods inserted/members complete, machine/PostgreSQL cores): %s", fleetTimelineStep, timelineString(res.timeline))
		line("  commit ticket hold p99 by op, sync: %s; steady: %s", res.syncLocks.byOp, res.steadyLocks.byOp)
		line("  commit tickets held (the replicas' hold seconds over the window: views sections in flight on average): %.0f%% of the sync, %.0f%% of the steady window",
			100*res.syncLocks.busy, 100*res.steadyLocks.busy)
		line("  cores used, sync / steady: PostgreSQL %.2f / %.2f, replicas %.2f / %.2f, machine %.2f / %.2f of %d",
			res.syncCores.postgres, res.steadyCores.postgres, res.syncCores.platform, res.steadyCores.platform,
			res.syncCores.machine, res.steadyCores.machine, goruntime.NumCPU())
		for _, phase := range []struct {
			name       string
			statements []statementTime
		}{{"sync", res.syncStatements}, {"steady", res.steadyStatements}} {
			line("  PostgreSQL's time by statement, %s (nested included):", phase.name)
			for _, st := range phase.statements {
				line("    %9.1f s %8d× %s", st.total.Seconds(), st.calls, st.query)
			}
		}
		line("  database B/node by table (indexes and TOAST included): %s", perNode(res.tables, fleetNodes))
		line("  B/node by relation of the largest tables (heap: live rows' bytes, then the file): %s", perNode(res.relations, fleetNodes))
		var shares []string
		for _, c := range res.changeLog {
			shares = append(shares, fmt.Sprintf("%s %s %.2f/node × %.0f B (%d%% compressed)", c.kind, c.typ,
				float64(c.entries)/fleetNodes, float64(c.imageBytes)/float64(max(c.entries, 1)), 100*c.compressed/max(c.entries, 1)))
		}
		line("  change log, entries per node × bytes kept of the state before per entry (delta or image): %s", strings.Join(shares, ", "))
		var fields []string
		for _, c := range res.changedFields {
			fields = append(fields, fmt.Sprintf("%s.%s %.2f/node", c.kind, c.field, float64(c.entries)/fleetNodes))
		}
		line("  change log, MODIFIED entries changing each field: %s", strings.Join(fields, ", "))
		nr := res.namespaceReports
		line("  change log, namespace usage reports: %d first, %d with the pods measured changed (by %.1f%% p50, %.1f%% p90 of the reported), %d CPU or memory alone, %d to unknown",
			nr.first, nr.pods, 100*nr.podsRelP50, 100*nr.podsRelP90, nr.usageOnly, nr.unknown)
		if res.replicas > 1 && t.mirroring <= 1 {
			line("  one replica mirrors all %d members (%d mirroring, the most on one %d): members are not shared across replicas", f.scale.members, t.mirroring, t.maxMembers)
		}
	}
}

var fleetLease = flag.String("fleet-lease", "15s,10s,2s",
	"BenchmarkFleet: the replicas' --leader-elect-lease-duration, --leader-elect-renew-deadline and --leader-elect-retry-period, comma-separated")

func fleetMemberID(i int) string { return fmt.Sprintf("fleet-%02d", i) }

// fleetArgs are every replica's flags besides the member directory:
// discovery of the hosting cluster (the framework's kube-apiserver, whose
// kubeconfig is in the process's working directory) and leader election
// with the timings of -fleet-lease, then those of -fleet-args.
func fleetArgs() ([]string, error) {
	parts := strings.Split(*fleetLease, ",")
	names := []string{"lease-duration", "renew-deadline", "retry-period"}
	if len(parts) != len(names) {
		return nil, fmt.Errorf("-fleet-lease=%q: want three durations, e.g. 15s,10s,2s", *fleetLease)
	}
	args := []string{"--cluster-id=" + fleetHostingID, "--kubeconfig=kubeconfig", "--leader-elect=true"}
	for i, p := range parts {
		d, err := time.ParseDuration(strings.TrimSpace(p))
		if err != nil {
			return nil, fmt.Errorf("-fleet-lease=%q: %w", *fleetLease, err)
		}
		args = append(args, "--leader-elect-"+names[i]+"="+d.String())
	}
	return append(args, strings.Fields(*fleetExtraArgs)...), nil
}

// fleetEnv is kube-apiserver with kwok simulating scale.nodes nodes and
// their pods, metrics-server scraping them, and the member directory;
// the sub-benchmarks start replicas of their own.
type fleetEnv struct {
	*env
	scale             fleetScale
	want              registryCounts // one member, mirrored under every cluster id
	nodeSeq, churnSeq int
	results           []fleetResult
}

func startFleetEnv(b *testing.B) *fleetEnv {
	args, err := fleetArgs()
	must(b, err)
	scale, err := parseFleetScale(*fleetScaleFlag)
	must(b, err)
	f := &fleetEnv{scale: scale}
	f.env = benchEnv(b, envOptions{name: "fleet", platformArgs: args, memberDir: true, simulator: true, stopPlatform: true,
		pgSettings: append([]string{"shared_preload_libraries=pg_stat_statements", "pg_stat_statements.track=all"}, strings.Fields(*fleetPGSettings)...),
		prepare: func(ctx context.Context, e *env) error {
			f.env = e
			return f.prepare(ctx)
		}})
	return f
}

// prepare tunes the simulator, seeds the cluster, waits until kwok runs it
// and metrics-server has (nearly) every node's usage, and writes the member
// directory.
func (f *fleetEnv) prepare(ctx context.Context) error {
	// kwok without node Leases (renewing 5,000 starves two cores, and
	// nothing reads them) and with fleetKwokConfig.
	base, err := os.ReadFile(filepath.Join(f.cp.WorkDir(), "kwok.yaml"))
	if err != nil {
		return fmt.Errorf("read the framework's kwok configuration: %w", err)
	}
	config := filepath.Join(f.cp.WorkDir(), "kwok-fleet.yaml")
	if err := os.WriteFile(config, append(base, fleetKwokConfig...), 0o644); err != nil {
		return err
	}
	if err := f.cp.RestartSimulatorComponent(ctx, "kwok", map[string]string{"config": config, "node-lease-duration-seconds": "0"}); err != nil {
		return err
	}
	if err := f.cp.RestartSimulatorComponent(ctx, "metrics-server", map[string]string{
		"metric-resolution": fleetMetricResolution.String(), "kubelet-request-timeout": fleetKubeletTimeout.String(),
	}); err != nil {
		return err
	}
	now := time.Now().UTC().Truncate(time.Second)
	nodes := func(ctx context.Context) error {
		return parallel(ctx, seedWorkers, f.scale.nodes, func(ctx context.Context, i int) error { return f.createSimulatedNode(ctx, i, now) })
	}
	if err := inOrder(ctx, nodes, f.createNamespaces(f.scale.namespaces()), f.createPods(f.scale.pods(), f.scale.nodes),
		f.waitNodesReady, f.waitPodsRunning, f.waitNodeMetrics); err != nil {
		return fmt.Errorf("seed the simulated cluster: %w", err)
	}
	if f.want, err = f.memberCounts(ctx); err != nil {
		return err
	}
	if f.want.nodes != int64(f.scale.nodes) || f.want.pods != int64(f.scale.pods()) || f.want.namespaces < int64(f.scale.namespaces()) {
		return fmt.Errorf("kube-apiserver holds %s, want %d nodes, %d pods and at least %d namespaces",
			f.want, f.scale.nodes, f.scale.pods(), f.scale.namespaces())
	}
	kubeconfig, err := os.ReadFile(f.cp.AdminKubeconfig())
	if err != nil {
		return err
	}
	for i := 1; i < f.scale.members; i++ {
		if err := os.WriteFile(filepath.Join(f.memberDir, fleetMemberID(i)), kubeconfig, 0o600); err != nil {
			return fmt.Errorf("write member kubeconfig: %w", err)
		}
	}
	return nil
}

// createSimulatedNode creates node i as kwok simulates it, with the list
// benchmarks' labels, size, taints and cordon (kwok keeps every node Ready).
// A merge patch then drops the not-ready taint admission adds.
func (f *fleetEnv) createSimulatedNode(ctx context.Context, i int, now time.Time) error {
	n := storeNode(i, now)
	taints := slices.DeleteFunc(kubeTaints(n.Taints), func(t corev1.Taint) bool { return t.Key == "node.kubernetes.io/unreachable" })
	node := framework.SimulatedNodeObject(framework.SimulatedNode{
		Name:          n.Name,
		Capacity:      kubeResources(n.Capacity),
		Allocatable:   kubeResources(n.Allocatable),
		Labels:        n.Labels,
		Taints:        taints,
		Unschedulable: n.Unschedulable,
	})
	created, err := f.kube.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("create Node %s: %w", n.Name, err)
	}
	if len(created.Spec.Taints) == len(taints) {
		return nil
	}
	patch, err := json.Marshal(map[string]any{"spec": map[string]any{"taints": taints}})
	if err != nil {
		return err
	}
	if _, err := f.kube.CoreV1().Nodes().Patch(ctx, n.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("set taints of Node %s: %w", n.Name, err)
	}
	return nil
}

func (f *fleetEnv) waitNodesReady(ctx context.Context) error {
	return pollUntil(ctx, 5*time.Second, 10*time.Minute, func(ctx context.Context) (bool, string, error) {
		ready, total := 0, 0
		err := f.eachPage(ctx, "nodes", func(page runtime.Object) {
			for _, n := range page.(*corev1.NodeList).Items {
				total++
				if slices.ContainsFunc(n.Status.Conditions, func(c corev1.NodeCondition) bool {
					return c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue
				}) {
					ready++
				}
			}
		})
		if err != nil {
			return false, err.Error(), nil
		}
		return total == f.scale.nodes && ready == f.scale.nodes, fmt.Sprintf("%d of %d nodes Ready", ready, total), nil
	})
}

// waitPodsRunning asks for one page of pods not Running (filtered in
// kube-apiserver), so a poll stays cheap while kwok is busy.
func (f *fleetEnv) waitPodsRunning(ctx context.Context) error {
	return pollUntil(ctx, 5*time.Second, 10*time.Minute, func(ctx context.Context) (bool, string, error) {
		page, err := f.kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "status.phase!=Running", Limit: 500})
		if err != nil {
			return false, err.Error(), nil
		}
		return len(page.Items) == 0 && page.Continue == "", fmt.Sprintf("at least %d pods not Running", len(page.Items)), nil
	})
}

// waitNodeMetrics lists metrics.k8s.io NodeMetrics through kube-apiserver,
// as discovery's scraper does, until fleetMetricsCoverage of the nodes have them.
func (f *fleetEnv) waitNodeMetrics(ctx context.Context) error {
	want := int(fleetMetricsCoverage * float64(f.scale.nodes))
	return pollUntil(ctx, 5*time.Second, 10*time.Minute, func(ctx context.Context) (bool, string, error) {
		body, err := f.kube.CoreV1().RESTClient().Get().AbsPath("/apis/" + framework.MetricsGroupVersion + "/nodes").DoRaw(ctx)
		if err != nil {
			return false, err.Error(), nil
		}
		var list struct {
			Items []json.RawMessage `json:"items"`
		}
		if err := json.Unmarshal(body, &list); err != nil {
			return false, fmt.Sprintf("decode NodeMetrics list: %v", err), nil
		}
		return len(list.Items) >= want, fmt.Sprintf("NodeMetrics of %d nodes, want %d", len(list.Items), want), nil
	})
}
