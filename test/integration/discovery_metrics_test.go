package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	metricsclient "k8s.io/metrics/pkg/client/clientset/versioned"

	platformv1alpha1 "github.com/example/platform-apiserver/pkg/apis/platform/v1alpha1"
	"github.com/example/platform-apiserver/pkg/registry"
	"github.com/example/platform-apiserver/test/framework"
)

// metricsScrapeInterval is the scraper's --metrics-interval in these tests.
// metrics-server has a new sample every framework.MetricResolution (10s), so
// a window in which the scraper records new samples spans several of those.
const metricsScrapeInterval = 2 * time.Second

// newSimulatorEnv runs the simulator (kwok nodes, metrics-server) with
// discovery mirroring its cluster as "local".
func newSimulatorEnv(t *testing.T, extraArgs ...string) *env {
	t.Helper()
	return newEnv(t, framework.Options{
		PlatformAPIServerBinary: os.Getenv("PLATFORM_APISERVER_BINARY"),
		StartSimulator:          true,
		StartControllerManager:  true, // lifts the nodes' not-ready taint
		ExtraPlatformArgs: append([]string{
			"--cluster-id=local",
			"--kubeconfig=kubeconfig",
			"--discovery-batch-delay=50ms",
		}, extraArgs...),
	})
}

// startMetricsEnv runs the simulator with discovery scraping it, creates
// the nodes "busy" (one pod requesting 1 CPU and 2Gi) and "idle", and
// waits until both show usage.
func startMetricsEnv(t *testing.T, extraArgs ...string) *env {
	t.Helper()
	e := newSimulatorEnv(t, append([]string{
		"--metrics-interval=" + metricsScrapeInterval.String(),
		"--metrics-resolution=" + framework.MetricResolution.String(),
	}, extraArgs...)...)
	ctx := t.Context()
	for _, name := range []string{"busy", "idle"} {
		if _, err := e.cp.CreateSimulatedNode(ctx, framework.SimulatedNode{Name: name}); err != nil {
			t.Fatal(err)
		}
	}
	e.kubectl(t, "create", "namespace", "load")
	if _, err := e.kube.CoreV1().Pods("load").Create(ctx, testPod("load", "worker", "busy", "1", "2Gi"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "usage of both nodes from metrics-server", 3*time.Minute, func(ctx context.Context) (bool, string) {
		busy, ok1 := e.usage(ctx, "local.busy")
		idle, ok2 := e.usage(ctx, "local.idle")
		if !ok1 || !ok2 {
			return false, "usage unknown so far"
		}
		return busy.CPU.Cmp(idle.CPU) > 0 && busy.Memory.Value() > 0, busy.CPU.String() + " vs " + idle.CPU.String()
	})
	return e
}

// usage returns a NodeCapacity's reported usage.
func (e *env) usage(ctx context.Context, name string) (platformv1alpha1.NodeUsage, bool) {
	nc, err := e.platform.PlatformV1alpha1().NodeCapacities().Get(ctx, name, metav1.GetOptions{})
	if err != nil || nc.Status.Usage == nil {
		return platformv1alpha1.NodeUsage{}, false
	}
	return *nc.Status.Usage, true
}

// quietCheck is how long TestDiscoveryMetrics watches a quiet member; the
// slow tier's TestDiscoveryQuietSoak watches for quietWindow: two of the
// report periods that used to restamp every node (5 minutes).
const (
	quietCheck  = time.Minute
	quietWindow = 10 * time.Minute
)

// usageUnknownAfter is TestDiscoveryMetrics's --usage-unknown-after: well
// over the least that --metrics-interval and metrics-server's resolution
// allow (discovery.MinUsageUnknownAfter, 14s here), for a loaded machine.
const usageUnknownAfter = 40 * time.Second

// TestDiscoveryMetrics scrapes the real metrics.k8s.io (metrics-server over
// kwok's simulated kubelets) with the default reporting (threshold 5% of
// allocatable, no report period): usage appears in NodeCapacity, a quiet
// member then causes no NodeCapacity watch event and no change-log row for
// quietCheck beyond its usage heartbeat (one ClusterCapacity version a
// minute), a node whose usage jumps gets exactly one MODIFIED event, and a
// hung metrics-server makes usage unknown. It runs in parallel with the
// other parallel tests: most of it is watching nothing happen.
func TestDiscoveryMetrics(t *testing.T) {
	t.Parallel()
	e := startMetricsEnv(t, "--usage-unknown-after="+usageUnknownAfter.String())
	ctx := t.Context()
	if v, err := e.platformMetric(ctx, "platform_discovery_metrics_samples_stored_total", `cluster="local"`); err != nil || v < 2 {
		t.Errorf("samples stored metric = %v, %v; want at least 2", v, err)
	}
	out := e.kubectl(t, "get", "nc", "local.busy")
	if row := row(t, out, "local.busy"); row[5] == "<unknown>" { // CPU USE/ALLOC
		t.Errorf("kubectl shows no usage for local.busy:\n%s", out)
	}

	t.Run("namespace usage is its pods' metrics", func(t *testing.T) {
		metrics := metricsclient.NewForConfigOrDie(e.cp.AdminConfig())
		eventually(t, "usage of namespace load next to its requests", time.Minute, func(ctx context.Context) (bool, string) {
			pods, err := metrics.MetricsV1beta1().PodMetricses("load").List(ctx, metav1.ListOptions{})
			if err != nil || len(pods.Items) == 0 {
				return false, fmt.Sprintf("PodMetrics of load: %v, %v", pods, err)
			}
			var cpu, memory int64
			for _, p := range pods.Items {
				for _, c := range p.Containers {
					cpu += c.Usage.Cpu().ScaledValue(resource.Nano)
					memory += c.Usage.Memory().Value()
				}
			}
			cn, err := e.platform.PlatformV1alpha1().ClusterNamespaces("load").Get(ctx, "local", metav1.GetOptions{})
			if err != nil || cn.Status.Usage == nil {
				return false, fmt.Sprintf("ClusterNamespace load: %v, %v", cn, err)
			}
			u := cn.Status.Usage
			got := u.CPU.ScaledValue(resource.Nano)
			// Memory is a gauge, constant here: equal. CPU is a rate and is
			// reported again only past 5 % of the requests (1 CPU).
			ok := u.Memory.Value() == memory && abs64(got-cpu) <= 50_000_000 && u.Pods == int64(len(pods.Items)) &&
				u.CPUOfRequests != nil && *u.CPUOfRequests == (got*100+500_000_000)/1_000_000_000
			return ok, fmt.Sprintf("reported %d nanocores, %d bytes, %d pods, %v%% of requests; metrics-server %d nanocores, %d bytes, %d pods",
				got, u.Memory.Value(), u.Pods, u.CPUOfRequests, cpu, memory, len(pods.Items))
		})
		out := e.kubectl(t, "get", "cns", "-n", "load", "-o", "wide")
		if !strings.Contains(out, "CPU USE") || !strings.Contains(out, "MEMORY USE") || !strings.Contains(out, "%)") {
			t.Errorf("kubectl get cns -n load -o wide shows no usage next to the requests:\n%s", out)
		}
	})

	t.Run("a quiet member stays quiet", func(t *testing.T) {
		e.checkQuiet(t, quietCheck)
	})

	t.Run("usage past the threshold is reported once", func(t *testing.T) {
		before, _ := e.usage(ctx, "local.busy")
		w := e.watchNodeCapacities(t)
		// kwok takes a pod's memory usage from this annotation; memory is a
		// gauge, so usage steps from ~1.7Gi to ~6.3Gi in one sample (CPU is a
		// rate and would pass through intermediate values).
		patch := `{"metadata":{"annotations":{"kwok.x-k8s.io/usage-memory":"6Gi"}}}`
		if _, err := e.kube.CoreV1().Pods("load").Patch(ctx, "worker", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, "metrics-server reports the new usage of busy", time.Minute, func(ctx context.Context) (bool, string) {
			m, err := e.nodeMetrics(ctx, "busy")
			return err == nil && m.Value() > 6<<30, fmt.Sprintf("%s, %v", m.String(), err)
		})
		seen := time.Now()
		eventually(t, "the reported usage of busy follows", 2*metricsScrapeInterval+10*time.Second, func(ctx context.Context) (bool, string) {
			u, _ := e.usage(ctx, "local.busy")
			return u.Memory.Value() > 6<<30, u.Memory.String()
		})
		t.Logf("reported %s after metrics-server had it", time.Since(seen).Round(100*time.Millisecond))
		// Two more metrics-server samples, then count.
		time.Sleep(2 * framework.MetricResolution)
		evs := w.stop()
		if len(evs) != 1 || evs[0].Type != watch.Modified || evs[0].Name != "local.busy" {
			t.Fatalf("events after busy's usage jumped from %s: %s; want exactly one MODIFIED of local.busy", before.Memory.String(), evs)
		}
		if v, err := e.platformMetric(ctx, "platform_discovery_usage_reports_total", `cluster="local"`); err != nil || v < 3 {
			t.Errorf("usage reports metric = %v, %v; want at least 3 (two first reports and this one)", v, err)
		}
	})

	t.Run("a hung metrics-server makes usage unknown, not stale", func(t *testing.T) {
		errorsBefore, err := e.platformMetric(ctx, "platform_discovery_metrics_scrape_errors_total", `cluster="local"`)
		if err != nil {
			t.Fatal(err)
		}
		w := e.watchNodeCapacities(t)
		frozen := time.Now()
		if err := e.cp.FreezeMetricsServer(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = e.cp.ThawMetricsServer() })
		// The scrapes hang until their list timeout, the heartbeat stops,
		// and maintenance ends the usage it no longer confirms: after
		// --usage-unknown-after plus up to the heartbeat's minute.
		eventually(t, "both nodes' usage unknown", usageUnknownAfter+2*time.Minute+30*time.Second, func(ctx context.Context) (bool, string) {
			_, busy := e.usage(ctx, "local.busy")
			_, idle := e.usage(ctx, "local.idle")
			return !busy && !idle, fmt.Sprintf("busy has usage %v, idle %v", busy, idle)
		})
		t.Logf("usage unknown %s after metrics-server froze", time.Since(frozen).Round(time.Second))
		if d := time.Since(frozen); d < usageUnknownAfter-framework.MetricResolution {
			t.Errorf("usage became unknown %s after metrics-server froze, before --usage-unknown-after (%s)", d, usageUnknownAfter)
		}
		cc, err := e.platform.PlatformV1alpha1().ClusterCapacities().Get(ctx, "local", metav1.GetOptions{})
		if err != nil || cc.Status.All.Usage != nil {
			t.Errorf("ClusterCapacity local sums usage %+v (%v), want none", cc.Status.All.Usage, err)
		}
		// A timeout, or 503 once the aggregator marks the APIService unavailable.
		if v, err := e.platformMetric(ctx, "platform_discovery_metrics_scrape_errors_total", `cluster="local"`); err != nil || v <= errorsBefore {
			t.Errorf("scrape errors %v → %v (%v); want the failed scrapes counted", errorsBefore, v, err)
		}
		if err := e.cp.ThawMetricsServer(); err != nil {
			t.Fatal(err)
		}
		eventually(t, "usage back after metrics-server resumed", 2*time.Minute, func(ctx context.Context) (bool, string) {
			_, busy := e.usage(ctx, "local.busy")
			_, idle := e.usage(ctx, "local.idle")
			return busy && idle, fmt.Sprintf("busy has usage %v, idle %v", busy, idle)
		})
		// One MODIFIED without usage per node, then one with it again.
		perNode := map[string][]bool{}
		for _, ev := range w.stop() {
			if ev.Type != watch.Modified {
				t.Errorf("unexpected %s", ev)
			}
			perNode[ev.Name] = append(perNode[ev.Name], ev.HasUsage)
		}
		for _, name := range []string{"local.busy", "local.idle"} {
			if got := perNode[name]; len(got) != 2 || got[0] || !got[1] {
				t.Errorf("%s's events had usage %v, want [false true]: unknown once, then back once", name, got)
			}
		}
	})
}

// TestDiscoveryQuietSoak (slow tier) is TestDiscoveryMetrics's quiet member
// watched for quietWindow: nothing a minute cannot show builds up over ten
// (TestQuietMeansQuiet proves the same with simulated time).
func TestDiscoveryQuietSoak(t *testing.T) {
	t.Parallel()
	e := startMetricsEnv(t)
	e.checkQuiet(t, quietWindow)
}

// TestDiscoveryUsagePeriodAndRetention runs with a short report period and
// retention: each node is restamped once per period although its usage
// does not move, history partitions older than the retention are dropped,
// a deleted node's samples go with it, and a recreated node starts with no
// usage.
func TestDiscoveryUsagePeriodAndRetention(t *testing.T) {
	t.Parallel()
	const period = 30 * time.Second
	e := startMetricsEnv(t, "--usage-report-period="+period.String(), "--metrics-retention=1h")
	ctx := t.Context()

	t.Run("restamped once per period", func(t *testing.T) {
		w := e.watchNodeCapacities(t)
		const window = 70 * time.Second
		time.Sleep(window) // counting what happens in the window
		byNode := map[string][]time.Time{}
		for _, ev := range w.stop() {
			if ev.Type != watch.Modified {
				t.Errorf("unexpected %s", ev)
				continue
			}
			byNode[ev.Name] = append(byNode[ev.Name], ev.UsageAt)
		}
		for _, name := range []string{"local.busy", "local.idle"} {
			stamps := byNode[name]
			// One restamp per period, by the first sample in the node's
			// next period; samples come every MetricResolution, so two
			// restamps are a period apart give or take that.
			if len(stamps) < int(window/period) || len(stamps) > int(window/period)+1 {
				t.Errorf("%s restamped %d times in %s with a %s period, want %d or %d: %v",
					name, len(stamps), window, period, int(window/period), int(window/period)+1, stamps)
			}
			for i := 1; i < len(stamps); i++ {
				if d := stamps[i].Sub(stamps[i-1]); d < period-framework.MetricResolution || d > period+framework.MetricResolution {
					t.Errorf("%s reported samples %s apart, want the period %s give or take %s", name, d, period, framework.MetricResolution)
				}
			}
		}
	})

	t.Run("retention drops old partitions", func(t *testing.T) {
		db := e.db(t)
		// History written by an earlier run: samples of busy 5h and 3h ago.
		if _, err := db.Exec(ctx, `SELECT cluster_node_metrics_ensure_partitions(now() - interval '5 hours', now() - interval '3 hours')`); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Exec(ctx, `
			INSERT INTO cluster_node_metrics (cluster_id, node, cpu_usage_nanocores, memory_usage_bytes, observed_at)
			SELECT 'local', 'busy', 1, 1, now() - make_interval(hours => h) FROM unnest(ARRAY[3, 5]) AS h`); err != nil {
			t.Fatal(err)
		}
		eventually(t, "partitions older than the retention dropped", time.Minute, func(ctx context.Context) (bool, string) {
			var old, oldRows, recent int64
			err := db.QueryRow(ctx, `SELECT
				(SELECT count(*) FROM cluster_node_metrics_partitions() WHERE upper_bound <= now() - interval '1 hour'),
				(SELECT count(*) FROM cluster_node_metrics WHERE observed_at < now() - interval '2 hours'),
				(SELECT count(*) FROM cluster_node_metrics WHERE observed_at > now() - interval '1 minute')`).Scan(&old, &oldRows, &recent)
			return err == nil && old == 0 && oldRows == 0 && recent > 0,
				fmt.Sprintf("old partitions %d, old samples %d, samples of the last minute %d, err %v", old, oldRows, recent, err)
		})
		if v, err := e.platformMetric(ctx, "platform_discovery_metrics_partitions_dropped_total"); err != nil || v < 2 {
			t.Errorf("partitions dropped metric = %v, %v; want at least 2", v, err)
		}
	})

	t.Run("a deleted node's samples go with it, its successor starts without usage", func(t *testing.T) {
		db := e.db(t)
		if err := e.kube.CoreV1().Nodes().Delete(ctx, "idle", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, "local.idle gone with its samples", time.Minute, func(ctx context.Context) (bool, string) {
			_, err := e.platform.PlatformV1alpha1().NodeCapacities().Get(ctx, "local.idle", metav1.GetOptions{})
			var samples int64
			if qerr := db.QueryRow(ctx, `SELECT count(*) FROM cluster_node_metrics WHERE cluster_id = 'local' AND node = 'idle'`).Scan(&samples); qerr != nil {
				return false, qerr.Error()
			}
			return apierrors.IsNotFound(err) && samples == 0, fmt.Sprintf("get: %v, samples: %d", err, samples)
		})
		w := e.watchNodeCapacities(t)
		created, err := e.cp.CreateSimulatedNode(ctx, framework.SimulatedNode{Name: "idle"})
		if err != nil {
			t.Fatal(err)
		}
		eventually(t, "the recreated node's usage", 2*time.Minute, func(ctx context.Context) (bool, string) {
			u, ok := e.usage(ctx, "local.idle")
			return ok, fmt.Sprint(u)
		})
		evs := w.stop()
		var first *nodeEvent
		for i := range evs {
			if evs[i].Name == "local.idle" {
				first = &evs[i]
				break
			}
		}
		if first == nil || first.Type != watch.Added || first.HasUsage {
			t.Errorf("first event of the recreated node: %v; want ADDED without usage (all: %s)", first, evs)
		}
		if u, _ := e.usage(ctx, "local.idle"); u.Timestamp.Time.Before(created.CreationTimestamp.Time) {
			t.Errorf("the recreated node shows a sample of %s, before its creation at %s", u.Timestamp, created.CreationTimestamp)
		}
	})
}

// checkQuiet watches the quiet member of startMetricsEnv for window: no
// NodeCapacity watch event and no change-log row beyond its usage heartbeat
// (one ClusterCapacity version a minute), while its scraper keeps recording
// samples and its mirror heartbeat keeps it Synced.
func (e *env) checkQuiet(t *testing.T, window time.Duration) {
	t.Helper()
	ctx := t.Context()
	// metrics-server's usage of a node with a constant load moves far
	// less than 5% of 4 CPUs and 16Gi.
	heartbeat := func(ctx context.Context) (time.Time, bool) {
		cc, err := e.platform.PlatformV1alpha1().ClusterCapacities().Get(ctx, "local", metav1.GetOptions{})
		if err != nil || cc.Status.Mirroring.LastUsageTime == nil {
			return time.Time{}, false
		}
		return cc.Status.Mirroring.LastUsageTime.Time, true
	}
	eventually(t, "the member's usage heartbeat", time.Minute, func(ctx context.Context) (bool, string) {
		at, ok := heartbeat(ctx)
		return ok, at.String()
	})
	out := e.kubectl(t, "get", "cc", "local", "-o", "wide")
	if cell(t, out, "local", "USAGE AGE") == "<unknown>" {
		t.Errorf("kubectl get cc local -o wide shows no usage age:\n%s", out)
	}
	changes := e.registryChangesByKind(t)
	stored, err := e.platformMetric(ctx, "platform_discovery_metrics_samples_stored_total", `cluster="local"`)
	if err != nil {
		t.Fatal(err)
	}
	w := e.watchNodeCapacities(t)
	time.Sleep(window) // the assertion is about what does not happen in this window
	if evs := w.stop(); len(evs) != 0 {
		t.Errorf("a NodeCapacity watch over %s of constant usage received %d events, want none: %s", window, len(evs), evs)
	}
	now := e.registryChangesByKind(t)
	for kind, n := range now {
		grew := n - changes[kind]
		switch {
		case kind == "ClusterCapacity/local":
			// The heartbeat: one version a minute (lastUsageResolution),
			// a few more if the member's last change time moved too.
			if limit := int64(window/time.Minute) + 2; grew > limit {
				t.Errorf("the member's ClusterCapacity took %d change rows over %s, want at most %d (its heartbeat, once a minute)", grew, window, limit)
			}
		case grew != 0:
			t.Errorf("%s took %d change rows over %s of constant usage, want none", kind, grew, window)
		}
	}
	if at, ok := heartbeat(ctx); !ok || time.Since(at) > 2*time.Minute+metricsScrapeInterval+framework.MetricResolution {
		t.Errorf("the usage heartbeat is %s old after the window (%v), want at most a minute past metrics-server's newest sample", time.Since(at), ok)
	}
	// The mirror's heartbeat kept moving (bookmarks, within the same
	// one version a minute): the quiet member is Synced, not Stale.
	cc, err := e.platform.PlatformV1alpha1().ClusterCapacities().Get(ctx, "local", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if m := cc.Status.Mirroring; m.State != "Synced" || m.CompleteAsOf == nil || time.Since(m.CompleteAsOf.Time) > registry.DefaultMemberStaleAfter {
		t.Errorf("after %s of quiet: mirroring %+v; want Synced, complete as of less than %s ago", window, m, registry.DefaultMemberStaleAfter)
	}
	// The scraper did record new samples meanwhile: quiet, not idle.
	if now, err := e.platformMetric(ctx, "platform_discovery_metrics_samples_stored_total", `cluster="local"`); err != nil || now < stored+2 {
		t.Errorf("samples stored went from %v to %v (%v) over %s; want new samples of both nodes", stored, now, err, window)
	}
	for _, name := range []string{"local.busy", "local.idle"} {
		if _, ok := e.usage(ctx, name); !ok {
			t.Errorf("%s shows no usage after %s of quiet scrapes, want its reported sample kept", name, window)
		}
	}
}

// nodeMetrics returns a node's memory usage as metrics-server reports it.
func (e *env) nodeMetrics(ctx context.Context, node string) (resource.Quantity, error) {
	out, _, err := e.cp.Kubectl(ctx, "get", "--raw", "/apis/metrics.k8s.io/v1beta1/nodes/"+node)
	if err != nil {
		return resource.Quantity{}, err
	}
	var m struct {
		Usage corev1.ResourceList `json:"usage"`
	}
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		return resource.Quantity{}, err
	}
	return m.Usage[corev1.ResourceMemory], nil
}

// db connects to the registry's database.
func (e *env) db(t *testing.T) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), e.cp.DatabaseURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// registryChangesByKind counts the change log's rows per kind, and
// ClusterCapacity's per member ("ClusterCapacity/<member>").
func (e *env) registryChangesByKind(t *testing.T) map[string]int64 {
	t.Helper()
	return countsBy(t, e.db(t), `SELECT CASE kind WHEN 'ClusterCapacity' THEN kind || '/' || cluster_id ELSE kind END, count(*)
		FROM registry_change GROUP BY 1`)
}

// nodeEvent is what the tests need of a NodeCapacity watch event.
type nodeEvent struct {
	Type     watch.EventType
	Name     string
	HasUsage bool
	UsageAt  time.Time
}

func (ev nodeEvent) String() string {
	return fmt.Sprintf("%s %s (usage at %s)", ev.Type, ev.Name, ev.UsageAt.Format(time.TimeOnly))
}

type nodeEvents []nodeEvent

func (evs nodeEvents) String() string {
	s := make([]string, len(evs))
	for i, ev := range evs {
		s[i] = ev.String()
	}
	return "[" + strings.Join(s, ", ") + "]"
}

// nodeWatch records the events of a NodeCapacity watch through the aggregator.
type nodeWatch struct {
	w    watch.Interface
	mu   sync.Mutex
	evs  nodeEvents
	err  error
	done chan struct{}
	// stopped: what arrives after stop is the client closing the stream.
	stopped bool
}

// watchNodeCapacities watches NodeCapacities from now on.
func (e *env) watchNodeCapacities(t *testing.T) *nodeWatch {
	t.Helper()
	return e.watchNodeCapacitiesWhere(t, "")
}

// watchNodeCapacitiesWhere watches the NodeCapacities a field selector
// selects from now on.
func (e *env) watchNodeCapacitiesWhere(t *testing.T, fieldSelector string) *nodeWatch {
	t.Helper()
	ncs := e.platform.PlatformV1alpha1().NodeCapacities()
	list, err := ncs.List(t.Context(), metav1.ListOptions{FieldSelector: fieldSelector})
	if err != nil {
		t.Fatal(err)
	}
	w, err := ncs.Watch(t.Context(), metav1.ListOptions{FieldSelector: fieldSelector, ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	nw := &nodeWatch{w: w, done: make(chan struct{})}
	go func() {
		defer close(nw.done)
		for ev := range w.ResultChan() {
			nw.mu.Lock()
			if nw.stopped {
				nw.mu.Unlock()
				continue
			}
			if nc, ok := ev.Object.(*platformv1alpha1.NodeCapacity); ok {
				r := nodeEvent{Type: ev.Type, Name: nc.Name, HasUsage: nc.Status.Usage != nil}
				if nc.Status.Usage != nil {
					r.UsageAt = nc.Status.Usage.Timestamp.Time
				}
				nw.evs = append(nw.evs, r)
			} else if ev.Type == watch.Error {
				nw.err = apierrors.FromObject(ev.Object)
			}
			nw.mu.Unlock()
		}
	}()
	t.Cleanup(w.Stop)
	return nw
}

// stop ends the watch and returns its events (bookmarks aside).
func (nw *nodeWatch) stop() nodeEvents {
	nw.mu.Lock()
	nw.stopped = true
	nw.mu.Unlock()
	nw.w.Stop()
	<-nw.done
	nw.mu.Lock()
	defer nw.mu.Unlock()
	if nw.err != nil {
		nw.evs = append(nw.evs, nodeEvent{Type: watch.Error, Name: nw.err.Error()})
	}
	return nw.evs
}

func abs64(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}
