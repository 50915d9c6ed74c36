package bench

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/example/platform-apiserver/pkg/registry/nodecapacity"
	"github.com/example/platform-apiserver/test/framework"
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
	fmt.Fprintf(os.Stderr, "discovery: kube-apiserver holds %s\n", d.want)
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
	var res syncResult
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
		got, err := d.afterSync(ctx, start)
		must(b, err)
		res.synced = max(res.synced, start.synced)
		res.hwmMiB = max(res.hwmMiB, got.hwmMiB)
		res.commits = got.commits
		res.ops++
		b.StartTimer()
	}
	b.ReportMetric(float64(d.want.total()), "rows")
	b.ReportMetric(res.hwmMiB, "hwm-MiB")
	summary.printf(discoverySection, "initial sync       %d rows in %s (worst of %d), peak VmHWM %.1f MiB against %d MiB: %s",
		d.want.total(), res.synced.Round(time.Millisecond), res.ops, res.hwmMiB, maxSyncHWMMiB, verdict(res.hwmMiB < maxSyncHWMMiB))
}

// syncResult is the worst of ops initial syncs; commits is each resource's
// platform_discovery_apply_duration_seconds.
type syncResult struct {
	synced  time.Duration
	hwmMiB  float64
	ops     int
	commits map[string]time.Duration
}

// startAndWaitSynced starts the server and polls until the registry holds
// what the member holds.
func (d *discoveryEnv) startAndWaitSynced(ctx context.Context) (*platformStart, error) {
	start := d.startPlatform(ctx)
	var last registryCounts
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, syncTimeout, true, func(ctx context.Context) (bool, error) {
		if err := start.failed(); err != nil {
			return false, err
		}
		c, err := d.registryCounts(ctx)
		if err != nil {
			return false, err
		}
		last = c
		return c == d.want, nil
	})
	start.synced = time.Since(start.begin)
	if err != nil {
		return start, fmt.Errorf("wait for the registry to hold %s: %w (last: %s)", d.want, err, last)
	}
	return start, nil
}

// afterSync waits for the start to finish, reads the server's VmHWM (the
// sync's peak) and checks objects through the aggregator.
func (d *discoveryEnv) afterSync(ctx context.Context, start *platformStart) (syncResult, error) {
	var res syncResult
	if err := start.wait(ctx); err != nil {
		return res, err
	}
	_, hwm, err := d.platformMemory()
	if err != nil {
		return res, err
	}
	res.hwmMiB = float64(hwm) / mib
	if res.commits, err = d.commitDurations(ctx); err != nil {
		return res, err
	}
	if err := d.heapProfile(ctx, "platform-apiserver.discovery-sync.heap.pprof", false); err != nil {
		return res, err
	}
	fmt.Fprintf(os.Stderr, "discovery: initial sync of %s in %s (framework start returned after %s), VmHWM %.1f MiB, list commits %v\n",
		d.want, start.synced.Round(time.Millisecond), start.took.Round(time.Millisecond), res.hwmMiB, res.commits)
	// A node carries its pods' requests and a namespace its pods.
	name := nodecapacity.Name(discoveryClusterID, nodeName(getNodeIndex))
	nc, err := d.platform.PlatformV1alpha1().NodeCapacities().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return res, fmt.Errorf("get NodeCapacity %s: %w", name, err)
	}
	if nc.Status.Requested.Pods != podsPerSyncNode || nc.Status.Requested.CPU.IsZero() {
		return res, fmt.Errorf("NodeCapacity %s requests %+v, want %d pods", name, nc.Status.Requested, podsPerSyncNode)
	}
	ns := syncNamespaceName(syncNamespaces / 2)
	cn, err := d.platform.PlatformV1alpha1().ClusterNamespaces(ns).Get(ctx, discoveryClusterID, metav1.GetOptions{})
	if err != nil {
		return res, fmt.Errorf("get ClusterNamespace %s/%s: %w", ns, discoveryClusterID, err)
	}
	if cn.Status.PodCount != podsPerSyncNamespace {
		return res, fmt.Errorf("ClusterNamespace %s/%s counts %d pods, want %d", ns, discoveryClusterID, cn.Status.PodCount, podsPerSyncNamespace)
	}
	return res, nil
}

// commitDurations reads each resource's time in committing transactions.
func (d *discoveryEnv) commitDurations(ctx context.Context) (map[string]time.Duration, error) {
	body, err := d.cp.PlatformMetrics(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]time.Duration{}
	for _, r := range []string{"namespaces", "nodes", "pods"} {
		s, err := framework.MetricSum(body, "platform_discovery_apply_duration_seconds_sum", `resource="`+r+`"`)
		if err != nil {
			return nil, err
		}
		out[r] = time.Duration(s * float64(time.Second)).Round(time.Millisecond)
	}
	return out, nil
}

// platformStart is a StartPlatformAPIServer in the background (it returns
// once the server is served through the aggregator; the benchmarks time
// what happens before); done closes once it returned err after took.
type platformStart struct {
	begin  time.Time
	synced time.Duration // when the registry held everything, for a sync
	done   chan struct{}
	took   time.Duration
	err    error
}

func (d *discoveryEnv) startPlatform(ctx context.Context) *platformStart {
	s := &platformStart{begin: time.Now(), done: make(chan struct{})}
	go func() {
		s.err = d.cp.StartPlatformAPIServer(ctx)
		s.took = time.Since(s.begin)
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
		err = wait.PollUntilContextTimeout(ctx, readyPollInterval, platformStartTimeout, true, func(ctx context.Context) (bool, error) {
			if err := start.failed(); err != nil {
				return false, err
			}
			return ready(ctx) == nil, nil
		})
		took := time.Since(begin)
		b.StopTimer()
		if err != nil {
			b.Fatalf("wait for /readyz: %v (last: %v)", err, ready(ctx))
		}
		must(b, start.wait(ctx))
		got, err := d.settleAfterRestart(ctx, snap)
		must(b, err)
		got.ready = took
		fmt.Fprintf(os.Stderr, "discovery: restart ready in %s; %d rows written, resourceVersion +%d, %d relists\n",
			took.Round(time.Millisecond), got.rows, got.rvDelta, got.relists)
		worst.ready = max(worst.ready, got.ready)
		worst.rows = max(worst.rows, got.rows)
		worst.rvDelta = max(worst.rvDelta, got.rvDelta)
		worst.relists = max(worst.relists, got.relists)
		worst.ops++
		b.StartTimer()
	}
	b.ReportMetric(float64(worst.rows), "rows-written")
	b.ReportMetric(float64(worst.rvDelta), "rv-delta")
	b.ReportMetric(float64(worst.relists), "relists")
	summary.printf(discoverySection, "restart unchanged  /readyz after %s (worst of %d), %d rows written (resourceVersion +%d), %d relists: %s",
		worst.ready.Round(time.Millisecond), worst.ops, worst.rows, worst.rvDelta, worst.relists,
		verdict(worst.ready < maxRestartReady && worst.rows == 0 && worst.rvDelta == 0))
}

type restartResult struct {
	ready                  time.Duration
	rows, rvDelta, relists int64
	ops                    int
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
	var started float64
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		var resumed, relisted float64
		if readCounters(ctx, d.cp.PlatformMetrics, counter{&resumed, "platform_discovery_resumes_total", []string{cluster}},
			counter{&relisted, "platform_discovery_relists_total", []string{cluster}}) != nil {
			return false, nil
		}
		started, res.relists = resumed+relisted, int64(relisted)
		return started >= 6, nil
	})
	if err != nil {
		return res, fmt.Errorf("wait for the six loops to resume (%v started): %w", started, err)
	}
	if err := sleepCtx(ctx, settleWindow); err != nil {
		return res, err
	}
	res.rows, res.rvDelta, err = d.rowsWrittenSince(ctx, snap)
	return res, err
}
