package bench

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/example/platform-apiserver/pkg/apis/platform/v1alpha1"
	"github.com/example/platform-apiserver/pkg/registry/nodecapacity"
	"github.com/example/platform-apiserver/pkg/registry/store"
)

const (
	// Goals from the discovery issue ("ready in seconds": maxRestartReady).
	maxSyncHWMMiB        = 300
	maxRestartReady      = 10 * time.Second
	syncTimeout          = 5 * time.Minute
	readyPollInterval    = 20 * time.Millisecond // the restart's resolution
	platformStartTimeout = 2 * time.Minute       // the framework's bound on a start
	// settleWindow is how long a restarted server is watched for writes
	// after its loops resumed.
	settleWindow = 3 * time.Second
)

var discoverySection = fmt.Sprintf("discovery summary (%d nodes, %d namespaces, %d pods in kube-apiserver; with several ops, the worst)", nodeCount, syncNamespaces, syncPods)

// BenchmarkDiscovery measures discovery on a control plane of its own,
// mirroring its kube-apiserver as member "local": each sub-benchmark needs
// the one before. See docs/benchmarks.md, "Discovery" and "Quiet fleet".
func BenchmarkDiscovery(b *testing.B) {
	d := startDiscoveryEnv(b)
	for _, s := range []struct {
		name  string
		bench func(*testing.B)
	}{
		{"initial-sync", d.benchInitialSync},
		{"restart-unchanged", d.benchRestart},
		{"freshness", d.benchFreshness},
		{"metrics-quiet-fleet", d.benchMetricsQuietFleet},
	} {
		if !b.Run(s.name, s.bench) {
			return
		}
	}
}

// benchInitialSync: per op, untimed, the member removed with the server
// stopped; timed, from the start until the registry holds the member.
func (d *discoveryEnv) benchInitialSync(b *testing.B) {
	ctx := b.Context()
	var synced time.Duration // the worst op's
	var hwmMiB float64
	for b.Loop() {
		b.StopTimer()
		must(b, d.cp.StopPlatformAPIServer())
		must(b, d.removeMember(ctx))
		if c, err := d.registryCounts(ctx); err != nil || c.total() != 0 {
			b.Fatalf("registry after deleting the member: %s, %v; want it empty", c, err)
		}
		b.StartTimer()
		start, err := d.startAndWaitSynced(ctx)
		b.StopTimer()
		must(b, err)
		hwm, err := d.afterSync(ctx, start)
		must(b, err)
		synced, hwmMiB = max(synced, start.synced), max(hwmMiB, hwm)
		b.StartTimer()
	}
	b.ReportMetric(float64(d.want.total()), "rows")
	b.ReportMetric(hwmMiB, "hwm-MiB")
	summary.printf(discoverySection, "initial sync       %d rows in %s (worst of %d), peak VmHWM %.1f MiB against %d MiB: %s",
		d.want.total(), synced.Round(time.Millisecond), b.N, hwmMiB, maxSyncHWMMiB, verdict(hwmMiB < maxSyncHWMMiB))
}

// startAndWaitSynced starts the server and polls until the registry holds
// what the member holds.
func (d *discoveryEnv) startAndWaitSynced(ctx context.Context) (*platformStart, error) {
	start := d.startPlatform(ctx)
	err := pollUntil(ctx, 100*time.Millisecond, syncTimeout, func(ctx context.Context) (bool, string, error) {
		if err := start.failed(); err != nil {
			return false, "", err
		}
		c, err := d.registryCounts(ctx)
		return c == d.want, c.String(), err
	})
	start.synced = time.Since(start.begin)
	if err != nil {
		return start, fmt.Errorf("wait for the registry to hold %s: %w", d.want, err)
	}
	return start, nil
}

// afterSync waits for the start to finish, returns the server's VmHWM in
// MiB (the sync's peak) and checks objects through the aggregator.
func (d *discoveryEnv) afterSync(ctx context.Context, start *platformStart) (float64, error) {
	if err := start.wait(ctx); err != nil {
		return 0, err
	}
	_, hwm, err := d.platformMemory()
	if err != nil {
		return 0, err
	}
	if err := d.heapProfile(ctx, "platform-apiserver.discovery-sync.heap.pprof", false); err != nil {
		return 0, err
	}
	// A node carries its pods' requests and a namespace its pods.
	name := nodecapacity.Name(discoveryClusterID, nodeName(getNodeIndex))
	nc, err := d.platform.PlatformV1alpha1().NodeCapacities().Get(ctx, name, metav1.GetOptions{})
	if err == nil && (nc.Status.Requested.Pods != podsPerSyncNode || nc.Status.Requested.CPU.IsZero()) {
		err = fmt.Errorf("NodeCapacity %s requests %+v, want %d pods", name, nc.Status.Requested, podsPerSyncNode)
	}
	if err != nil {
		return 0, err
	}
	ns := syncNamespaceName(syncNamespaces / 2)
	cn, err := d.platform.PlatformV1alpha1().ClusterNamespaces(ns).Get(ctx, discoveryClusterID, metav1.GetOptions{})
	if err == nil && cn.Status.PodCount != podsPerSyncNamespace {
		err = fmt.Errorf("ClusterNamespace %s/%s counts %d pods, want %d", ns, discoveryClusterID, cn.Status.PodCount, podsPerSyncNamespace)
	}
	return float64(hwm) / mib, err
}

// platformStart is a StartPlatformAPIServer in the background (it returns
// once the server is served through the aggregator; the benchmarks time
// what happens before); done closes once it returned err.
type platformStart struct {
	begin  time.Time
	synced time.Duration // when the registry held everything, for a sync
	done   chan struct{}
	err    error
}

func (d *discoveryEnv) startPlatform(ctx context.Context) *platformStart {
	s := &platformStart{begin: time.Now(), done: make(chan struct{})}
	go func() {
		s.err = d.cp.StartPlatformAPIServer(ctx)
		close(s.done)
	}()
	return s
}

func (s *platformStart) failed() error {
	select {
	case <-s.done:
		return s.err
	default:
		return nil
	}
}

func (s *platformStart) wait(ctx context.Context) error {
	select {
	case <-s.done:
		return s.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// benchRestart: per op, a graceful restart with nothing changed, timed from
// the start until /readyz answers 200; untimed, the rows written after.
func (d *discoveryEnv) benchRestart(b *testing.B) {
	ctx := b.Context()
	ready, err := d.readyzProbe()
	must(b, err)
	var worst restartResult
	for b.Loop() {
		b.StopTimer()
		snap, err := d.snapshot(ctx)
		must(b, err)
		must(b, d.cp.StopPlatformAPIServer())
		b.StartTimer()
		begin := time.Now()
		start := d.startPlatform(ctx)
		err = pollUntil(ctx, readyPollInterval, platformStartTimeout, func(ctx context.Context) (bool, string, error) {
			if err := start.failed(); err != nil {
				return false, "", err
			}
			err := ready(ctx)
			return err == nil, fmt.Sprint(err), nil
		})
		took := time.Since(begin)
		b.StopTimer()
		if err != nil {
			b.Fatalf("wait for /readyz: %v", err)
		}
		must(b, start.wait(ctx))
		got, err := d.settleAfterRestart(ctx, snap)
		must(b, err)
		worst.ready = max(worst.ready, took)
		worst.rows = max(worst.rows, got.rows)
		worst.rvDelta = max(worst.rvDelta, got.rvDelta)
		worst.relists = max(worst.relists, got.relists)
		b.StartTimer()
	}
	b.ReportMetric(float64(worst.rows), "rows-written")
	b.ReportMetric(float64(worst.rvDelta), "rv-delta")
	b.ReportMetric(float64(worst.relists), "relists")
	summary.printf(discoverySection, "restart unchanged  /readyz after %s (worst of %d), %d rows written (resourceVersion +%d), %d relists: %s",
		worst.ready.Round(time.Millisecond), b.N, worst.rows, worst.rvDelta, worst.relists,
		verdict(worst.ready < maxRestartReady && worst.rows == 0 && worst.rvDelta == 0))
}

type restartResult struct {
	ready                  time.Duration // the worst op's
	rows, rvDelta, relists int64
}

// readyzProbe checks the platform-apiserver's /readyz directly, anonymously
// as a kubelet's probe, on a fresh connection per call.
func (d *discoveryEnv) readyzProbe() (func(context.Context) error, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(d.cp.PlatformServingCA()) {
		return nil, errors.New("no CA certificate in the platform-apiserver's serving CA")
	}
	client := &http.Client{
		Timeout:   5 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, DisableKeepAlives: true},
	}
	url := d.cp.PlatformServerURL() + "/readyz"
	return func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET %s: %s", url, resp.Status)
		}
		return nil
	}, nil
}

// settleAfterRestart waits until the six loops (one per member resource) resumed (or relisted),
// then settleWindow, and counts what was written since snap.
func (d *discoveryEnv) settleAfterRestart(ctx context.Context, snap registrySnapshot) (restartResult, error) {
	var res restartResult
	cluster := `cluster="` + discoveryClusterID + `"`
	err := pollUntil(ctx, 100*time.Millisecond, time.Minute, func(ctx context.Context) (bool, string, error) {
		var resumed, relisted float64
		err := readCounters(ctx, d.cp.PlatformMetrics, counter{&resumed, "platform_discovery_resumes_total", []string{cluster}},
			counter{&relisted, "platform_discovery_relists_total", []string{cluster}})
		res.relists = int64(relisted)
		return err == nil && resumed+relisted >= 6, fmt.Sprintf("%v started, %v", resumed+relisted, err), nil
	})
	if err != nil {
		return res, fmt.Errorf("wait for the six loops to resume: %w", err)
	}
	if err := sleepCtx(ctx, settleWindow); err != nil {
		return res, err
	}
	res.rows, res.rvDelta, err = d.rowsWrittenSince(ctx, snap)
	return res, err
}

const (
	// discoveryClusterID is the member mirrored: the environment's own
	// kube-apiserver, seeded with nodeCount Nodes, syncNamespaces Namespaces
	// and syncPods Pods (pod j on node j%nodeCount, in namespace
	// j/podsPerSyncNamespace).
	discoveryClusterID   = "local"
	syncNamespaces       = 10000
	syncPods             = 50000
	podsPerSyncNode      = syncPods / nodeCount
	podsPerSyncNamespace = syncPods / syncNamespaces
)

// discoveryArgs mirror the framework's kube-apiserver (whose kubeconfig is
// in the working directory) as member "local"; all else is the default.
var discoveryArgs = []string{"--cluster-id=" + discoveryClusterID, "--kubeconfig=kubeconfig"}

// discoveryEnv is a control plane of its own whose server runs discovery.
type discoveryEnv struct {
	*env
	want    registryCounts // the seeded member, which a sync mirrors row for row
	seq     int            // the freshness changes
	scrapes int            // the metrics scrapes, one interval apart
}

// startDiscoveryEnv starts the environment with its server stopped (after
// syncing the near-empty cluster), seeds kube-apiserver and counts it.
func startDiscoveryEnv(b *testing.B) *discoveryEnv {
	d := &discoveryEnv{}
	d.env = benchEnv(b, envOptions{name: "discovery", platformArgs: discoveryArgs, stopPlatform: true, prepare: func(ctx context.Context, e *env) error {
		d.env = e
		now := time.Now().UTC().Truncate(time.Second)
		nodes := func(ctx context.Context) error { return e.createKubeNodes(ctx, now) }
		if err := inOrder(ctx, nodes, e.createNamespaces(syncNamespaces), e.createPods(syncPods, nodeCount)); err != nil {
			return err
		}
		var err error
		if d.want, err = e.memberCounts(ctx); err != nil {
			return err
		}
		if d.want.nodes != nodeCount || d.want.pods != syncPods || d.want.namespaces < syncNamespaces {
			return fmt.Errorf("kube-apiserver holds %s, want %d nodes, %d pods and at least %d namespaces", d.want, nodeCount, syncPods, syncNamespaces)
		}
		return nil
	}})
	return d
}

// registryCounts counts the member's rows (the only member here).
func (d *discoveryEnv) registryCounts(ctx context.Context) (registryCounts, error) {
	counts, err := registryCountsByCluster(ctx, d.db)
	return counts[discoveryClusterID], err
}

// registrySnapshot is the registry's resourceVersion and a transaction id
// (txid_current assigns one), to find rows of any table written after it.
type registrySnapshot struct {
	rv  int64
	xid string
}

func (d *discoveryEnv) snapshot(ctx context.Context) (s registrySnapshot, err error) {
	err = d.db.QueryRow(ctx, `SELECT (SELECT resource_version FROM registry_state), txid_current()::text`).Scan(&s.rv, &s.xid)
	return s, err
}

// rowsWrittenSince counts the member's rows whose xmin is after s, and how
// far the resourceVersion moved.
func (d *discoveryEnv) rowsWrittenSince(ctx context.Context, s registrySnapshot) (rows, rvDelta int64, err error) {
	var rv int64
	err = d.db.QueryRow(ctx, `
		SELECT (SELECT resource_version FROM registry_state),
		       (SELECT count(*) FROM cluster_namespace WHERE cluster_id = $1 AND age(xmin) < age($2::xid))
		     + (SELECT count(*) FROM cluster_node WHERE cluster_id = $1 AND age(xmin) < age($2::xid))
		     + (SELECT count(*) FROM cluster_pod WHERE cluster_id = $1 AND age(xmin) < age($2::xid))
		     + (SELECT count(*) FROM cluster_resource_quota WHERE cluster_id = $1 AND age(xmin) < age($2::xid))`,
		discoveryClusterID, s.xid).Scan(&rv, &rows)
	if err != nil {
		return 0, 0, fmt.Errorf("count rows written: %w", err)
	}
	return rows, rv - s.rv, nil
}

// removeMember removes the member's rows and cursors (the server stopped),
// so the next start syncs it from scratch.
func (d *discoveryEnv) removeMember(ctx context.Context) error {
	res, err := d.registry.ReconcileMembers(ctx, store.MembersView{Unconfigured: []string{discoveryClusterID}})
	if err != nil {
		return fmt.Errorf("remove member %s: %w", discoveryClusterID, err)
	}
	if len(res.Removed) != 1 {
		return fmt.Errorf("remove member %s: the registry answered %+v", discoveryClusterID, res)
	}
	return nil
}

const (
	// churnNamespaces namespaces are relabelled, round robin, churnRate
	// times a second for churnWindow per op: each once a second.
	churnNamespaces = 20
	churnRate       = 20
	churnWindow     = 20 * time.Second
	// churnLabel numbers the changes, so the watcher can tell which one an
	// event carries.
	churnLabel = "bench.platform.example.io/churn"
	// visibleTimeout bounds how long the last change may take to show up;
	// far beyond the goal, it only catches a lost change.
	visibleTimeout = 30 * time.Second
	// maxFreshnessP99 is the goal for a change's way from
	// kube-apiserver to our API.
	maxFreshnessP99 = time.Second
)

// benchFreshness opens one watch of ClusterNamespaces through the
// aggregator; each op then relabels churnNamespaces namespaces in
// kube-apiserver, churnRate changes a second for churnWindow, and waits
// until every change has been seen. A change's latency is from its patch
// returning to the receipt of the first event that carries it or a later
// change of the same namespace (a batch keeps only a namespace's latest
// state, so a change can be superseded before it is visible).
func (d *discoveryEnv) benchFreshness(b *testing.B) {
	ctx := b.Context()
	g := newWatchGroup(ctx)
	defer g.close()
	receipts, err := d.watchClusterNamespaces(ctx, g)
	must(b, err)
	// The first change proves the watch is established; not a sample.
	if _, err := d.churn(ctx, receipts, 1); err != nil {
		b.Fatalf("first change: %v", err)
	}
	pid, err := d.platformPID()
	must(b, err)
	cpuBefore := cpuClock(pid)
	lagBefore, err := d.commitLag(ctx)
	must(b, err)
	begin := time.Now()
	hist := loopLatencies(b, func() ([]time.Duration, error) {
		return d.churn(ctx, receipts, int(churnWindow.Seconds())*churnRate)
	})
	elapsed := time.Since(begin)
	cpuAfter := cpuClock(pid)
	lagAfter, err := d.commitLag(ctx)
	must(b, err)
	lat := hist.summary()
	rate := float64(lat.samples) / elapsed.Seconds()
	cores := float64(cpuAfter[0]-cpuBefore[0]) / float64(elapsed)
	commitLag := lagAfter.since(lagBefore)
	b.ReportMetric(0, "ns/op") // an op is a fixed window
	lat.report(b, "", true)
	b.ReportMetric(float64(lat.samples)/float64(b.N), "changes/op")
	b.ReportMetric(ms(commitLag), "commit-lag-ms")
	b.ReportMetric(cores, "platform-cores")
	summary.printf(discoverySection, "freshness          %s changes at %.1f/s (discovery commit lag %s, server %.2f cores) against p99 < %s: %s",
		lat, rate, commitLag.Round(time.Millisecond), cores, maxFreshnessP99, verdict(lat.p99 < maxFreshnessP99))
}

// churn writes n changes, churnRate a second, round robin over the churned
// namespaces, then waits until each is visible through the watch and
// returns each change's latency.
func (d *discoveryEnv) churn(ctx context.Context, receipts <-chan nsReceipt, n int) ([]time.Duration, error) {
	type change struct {
		seq     int
		written time.Time
	}
	pending := map[string][]change{}
	err := every(ctx, time.Second/churnRate, n, func() error {
		seq := d.seq
		d.seq++
		ns := syncNamespaceName(seq % churnNamespaces * (syncNamespaces / churnNamespaces)) // spread over the seeded ones
		if err := d.relabel(ctx, "namespaces", ns, churnLabel, strconv.Itoa(seq)); err != nil {
			return err
		}
		pending[ns] = append(pending[ns], change{seq: seq, written: time.Now()})
		return nil
	})
	if err != nil {
		return nil, err
	}

	latencies := make([]time.Duration, 0, n)
	err = receive(ctx, receipts, visibleTimeout, func(r nsReceipt) (bool, error) {
		if r.err != nil {
			return false, r.err
		}
		waiting := pending[r.namespace]
		for len(waiting) > 0 && waiting[0].seq <= r.seq {
			// A receipt before the patch returned is possible in
			// principle; it counts as immediate.
			latencies = append(latencies, max(0, r.at.Sub(waiting[0].written)))
			waiting = waiting[1:]
		}
		pending[r.namespace] = waiting
		return len(latencies) == n, nil
	}, func() error {
		return fmt.Errorf("%d of %d changes visible through the watch after %s", len(latencies), n, visibleTimeout)
	})
	return latencies, err
}

// nsReceipt is the receipt of an event carrying change seq of a namespace,
// or the error that ended the watch.
type nsReceipt struct {
	namespace string
	seq       int
	at        time.Time
	err       error
}

// watchClusterNamespaces watches ClusterNamespaces in every namespace from
// now, in g on a connection of its own, and sends a receipt of each churned
// namespace's change.
func (d *discoveryEnv) watchClusterNamespaces(ctx context.Context, g *watchGroup) (<-chan nsReceipt, error) {
	c, err := g.client(d.cp.AdminConfig(), nil)
	if err != nil {
		return nil, err
	}
	cns := c.PlatformV1alpha1().ClusterNamespaces("")
	list, err := cns.List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		return nil, fmt.Errorf("list ClusterNamespaces for a resourceVersion: %w", err)
	}
	// Room for every receipt of a long run: the reader never blocks, so
	// its timestamps are the events' arrival.
	receipts := make(chan nsReceipt, 1<<16)
	f := follower{open: cns.Watch, event: func(ev watch.Event, at time.Time) bool {
		cn, ok := ev.Object.(*v1alpha1.ClusterNamespace)
		if !ok {
			deliver(g.ctx, receipts, nsReceipt{err: fmt.Errorf("%s event with a %T", ev.Type, ev.Object)})
			return false
		}
		label, ok := cn.Labels[churnLabel]
		if !ok || cn.Name != discoveryClusterID || ev.Type == watch.Bookmark {
			return true // not a churned namespace
		}
		seq, err := strconv.Atoi(label)
		if err != nil {
			deliver(g.ctx, receipts, nsReceipt{err: fmt.Errorf("ClusterNamespace %s/%s has %s=%q", cn.Namespace, cn.Name, churnLabel, label)})
			return false
		}
		return deliver(g.ctx, receipts, nsReceipt{namespace: cn.Namespace, seq: seq, at: at})
	}, ended: func(err error) bool {
		deliver(g.ctx, receipts, nsReceipt{err: err})
		return false
	}}
	g.goWatch(func(ctx context.Context) { f.follow(ctx, list.ResourceVersion) })
	return receipts, nil
}

// lagTotals are the sum and count of discovery's commit lag of namespaces.
type lagTotals struct{ sum, count float64 }

func (l lagTotals) since(before lagTotals) time.Duration {
	n := l.count - before.count
	if n <= 0 {
		return 0
	}
	return time.Duration((l.sum - before.sum) / n * float64(time.Second))
}

func (d *discoveryEnv) commitLag(ctx context.Context) (lagTotals, error) {
	var l lagTotals
	labels := []string{`cluster="` + discoveryClusterID + `"`, `resource="namespaces"`}
	err := readCounters(ctx, d.cp.PlatformMetrics,
		counter{&l.sum, "platform_discovery_commit_lag_seconds_sum", labels},
		counter{&l.count, "platform_discovery_commit_lag_seconds_count", labels})
	return l, err
}
