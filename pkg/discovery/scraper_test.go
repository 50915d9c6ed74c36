package discovery

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/component-base/metrics/testutil"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"
	metricsfake "k8s.io/metrics/pkg/client/clientset/versioned/fake"
	"k8s.io/utils/clock"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/example/platform-apiserver/pkg/registry/postgres"
	"github.com/example/platform-apiserver/pkg/registry/store"
	pgtest "github.com/example/platform-apiserver/test/framework/postgres"
)

func nodeMetrics(name, cpu, mem string, at time.Time) *metricsv1beta1.NodeMetrics {
	return &metricsv1beta1.NodeMetrics{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Timestamp:  metav1.NewTime(at),
		Window:     metav1.Duration{Duration: 20 * time.Second},
		Usage:      corev1.ResourceList{"cpu": resource.MustParse(cpu), "memory": resource.MustParse(mem)},
	}
}

// podMetrics is a pod's metrics with one container per (cpu, memory) pair.
func podMetrics(namespace, name string, at time.Time, usage ...string) metricsv1beta1.PodMetrics {
	p := metricsv1beta1.PodMetrics{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}, Timestamp: metav1.NewTime(at)}
	for i := 0; i+1 < len(usage); i += 2 {
		p.Containers = append(p.Containers, metricsv1beta1.ContainerMetrics{
			Name:  fmt.Sprintf("c%d", i/2),
			Usage: corev1.ResourceList{"cpu": resource.MustParse(usage[i]), "memory": resource.MustParse(usage[i+1])},
		})
	}
	return p
}

// TestScraperStoresUsage scrapes a fake metrics.k8s.io into a real registry.
func TestScraperStoresUsage(t *testing.T) {
	ctx := t.Context()
	reg, err := postgres.Open(ctx, pgtest.NewTestDatabase(t), postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(reg.Close)
	if err := reg.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	alloc := store.Quantities{CPUMillis: 4000, MemoryBytes: 16 << 30}
	nodes := []store.Node{{Name: "a", Ready: true, Allocatable: alloc}, {Name: "b", Ready: true, Allocatable: alloc}, {Name: "c", Ready: true, Allocatable: alloc}}
	namespaces := []store.Namespace{{Name: "team-a", UID: "a", Phase: "Active"}, {Name: "team-b", UID: "b", Phase: "Active"}, {Name: "idle", UID: "i", Phase: "Active"}}
	if err := reg.Apply(ctx, store.Batch{ClusterID: "m", Nodes: nodes, Namespaces: namespaces}); err != nil {
		t.Fatal(err)
	}
	at := time.Now().UTC().Truncate(time.Second)
	bad := nodeMetrics("c", "1", "1Gi", at)
	bad.Usage["cpu"] = resource.MustParse("-5m")                   // malformed: skipped, the others stored
	ancient := nodeMetrics("c", "1", "1Gi", at.Add(-48*time.Hour)) // older than the retention: skipped
	future := nodeMetrics("c", "1", "1Gi", at.Add(48*time.Hour))   // a member clock far ahead: skipped
	ahead := nodeMetrics("d", "1", "1Gi", at.Add(30*time.Minute))  // of a node the registry lacks, a clock a little ahead
	list := &metricsv1beta1.NodeMetricsList{Items: []metricsv1beta1.NodeMetrics{
		*nodeMetrics("a", "1500000u", "2G", at), // micro-cores and decimal giga occur in real metrics
		*nodeMetrics("b", "250m", "512Mi", at),
		*bad, *ancient, *future, *ahead,
	}}
	// The fake's object tracker files NodeMetrics under a guessed resource
	// name, not "nodes"; answer the list directly.
	client := metricsfake.NewSimpleClientset()
	client.PrependReactor("list", "nodes", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, list, nil
	})
	pods := &metricsv1beta1.PodMetricsList{Items: []metricsv1beta1.PodMetrics{
		podMetrics("team-a", "web-1", at, "100m", "100Mi", "50m", "28Mi"), // two containers
		podMetrics("team-a", "web-2", at, "250000u", "0.5Gi"),
		podMetrics("team-b", "db-1", at.Add(-5*time.Second), "1", "1Gi"),
		podMetrics("team-b", "bad", at, "-1m", "1Mi"), // malformed: left out
	}}
	client.PrependReactor("list", "pods", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, pods, nil
	})
	s := newScraper(testScraperParams(client, reg))

	if got := s.scrapeOnce(ctx); got.Stored != 2 || got.Reported != 2 {
		t.Fatalf("first scrape recorded %+v, want 2 samples stored and reported", got)
	}
	// The heartbeat: the newest sample, but never ahead of this clock.
	if hb := s.lastUsage(); hb.Before(at) || hb.After(time.Now()) {
		t.Errorf("usage heartbeat %s after a scrape with samples at %s and one 30 minutes ahead, want between %s and now", hb, at, at)
	}
	if v, err := testutil.GetGaugeMetricValue(usageHeartbeat.WithLabelValues("m")); err != nil || v != float64(s.lastUsage().UnixNano())/1e9 {
		t.Errorf("usage heartbeat metric %v (%v), want %s", v, err, s.lastUsage())
	}
	// Namespace usage: the sum over its pods' containers.
	for _, want := range []struct {
		namespace   string
		cpu, memory int64
		pods        int64
		at          time.Time
	}{
		{"team-a", 400_000_000, 128<<20 + 512<<20, 2, at},
		{"team-b", 1_000_000_000, 1 << 30, 1, at.Add(-5 * time.Second)},
	} {
		ns, err := reg.GetClusterNamespace(ctx, want.namespace, "m")
		if err != nil {
			t.Fatal(err)
		}
		u := ns.Usage
		if u == nil || u.CPUNanoCores != want.cpu || u.MemoryBytes != want.memory || u.Pods != want.pods || !u.Timestamp.Equal(want.at) {
			t.Errorf("namespace %s usage %+v, want %d nanocores, %d bytes, %d pods at %s", want.namespace, u, want.cpu, want.memory, want.pods, want.at)
		}
	}
	if ns, err := reg.GetClusterNamespace(ctx, "idle", "m"); err != nil || ns.Usage != nil {
		t.Errorf("namespace without pod metrics: %+v, %v; want its usage unknown", ns, err)
	}
	if got := s.scrapeOnce(ctx); got != (store.MetricsRecorded{}) {
		t.Errorf("a repeated scrape of the same samples recorded %+v, want nothing (ON CONFLICT DO NOTHING)", got)
	}
	tests := []struct {
		node          string
		wantNanoCores int64
		wantBytes     int64
	}{
		{"a", 1_500_000_000, 2_000_000_000},
		{"b", 250_000_000, 512 << 20},
	}
	for _, tt := range tests {
		nc, err := reg.GetNodeCapacity(ctx, "m", tt.node)
		if err != nil {
			t.Fatal(err)
		}
		if nc.Usage == nil || nc.Usage.CPUNanoCores != tt.wantNanoCores || nc.Usage.MemoryBytes != tt.wantBytes || !nc.Usage.Timestamp.Equal(at) || nc.Usage.Window != 20*time.Second {
			t.Errorf("node %s usage = %+v, want %d nanocores, %d bytes at %s over 20s", tt.node, nc.Usage, tt.wantNanoCores, tt.wantBytes, at)
		}
	}
	if nc, err := reg.GetNodeCapacity(ctx, "m", "c"); err != nil || nc.Usage != nil {
		t.Errorf("node c (malformed sample, timestamps out of range) usage = %+v, %v; want unknown", nc.Usage, err)
	}
}

// TestScraperErrorReasons tells the failures of metrics.k8s.io apart in
// errors_total, and keeps going after each.
func TestScraperErrorReasons(t *testing.T) {
	gr := schema.GroupResource{Group: "metrics.k8s.io", Resource: "nodes"}
	tests := []struct {
		name   string
		err    error
		reason string
	}{
		{"API absent (404)", apierrors.NewNotFound(gr, ""), "metrics_api_absent"},
		{"forbidden (403)", apierrors.NewForbidden(gr, "", errors.New("no RBAC")), "forbidden"},
		{"backend down (503)", apierrors.NewServiceUnavailable("the backend is not answering"), "metrics_api_unavailable"},
		{"unauthorized (401)", apierrors.NewUnauthorized("bad token"), "unauthorized"},
		{"timeout", apierrors.NewTimeoutError("slow", 1), "timeout"},
		{"connection refused", errors.New("dial tcp 127.0.0.1:1: connect: connection refused"), "member_unavailable"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client := metricsfake.NewSimpleClientset()
			client.PrependReactor("list", "nodes", func(clienttesting.Action) (bool, runtime.Object, error) {
				return true, nil, tt.err
			})
			s := newScraper(testScraperParams(client, &recordingStore{}))
			before := scrapeErrorCount(t, "m", tt.reason)
			if got := s.scrapeOnce(t.Context()); got != (store.MetricsRecorded{}) {
				t.Errorf("recorded %+v after a failed list", got)
			}
			if got := scrapeErrorCount(t, "m", tt.reason) - before; got != 1 {
				t.Errorf("%s errors counted %v times, want 1", tt.reason, got)
			}
		})
	}
}

// TestScraperStartsWithJitter: the first scrape waits FirstDelay, later
// ones the interval.
func TestScraperStartsWithJitter(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Now())
	lists := make(chan struct{}, 10)
	client := metricsfake.NewSimpleClientset()
	client.PrependReactor("list", "nodes", func(clienttesting.Action) (bool, runtime.Object, error) {
		lists <- struct{}{}
		return true, &metricsv1beta1.NodeMetricsList{}, nil
	})
	p := testScraperParams(client, &recordingStore{})
	p.Clock, p.FirstDelay = clk, 7*time.Second
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go newScraper(p).run(ctx)
	steps := []struct {
		advance   time.Duration
		wantLists int
	}{
		{advance: 6 * time.Second, wantLists: 0},
		{advance: time.Second, wantLists: 1},
		{advance: 59 * time.Second, wantLists: 0},
		{advance: time.Second, wantLists: 1},
	}
	for i, step := range steps {
		if err := wait.PollUntilContextTimeout(ctx, time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
			return clk.HasWaiters(), nil
		}); err != nil {
			t.Fatalf("step %d: the scraper never waited: %v", i, err)
		}
		clk.Step(step.advance)
		got := 0
		if step.wantLists > 0 {
			select {
			case <-lists:
				got = 1
			case <-time.After(5 * time.Second):
			}
		}
		select {
		case <-lists:
			got++
		case <-time.After(50 * time.Millisecond):
		}
		if got != step.wantLists {
			t.Fatalf("step %d (+%s): %d scrapes, want %d", i, step.advance, got, step.wantLists)
		}
	}
}

func testScraperParams(client *metricsfake.Clientset, st store.Writer) scraperParams {
	return scraperParams{
		ClusterID: "m", Client: client, Store: newMemberStore(st, "m", func(error) {}),
		Metrics: MetricsConfig{
			Interval: time.Minute, ListTimeout: 10 * time.Second, WriteTimeout: 10 * time.Second,
			UsageReporting: store.UsageReporting{Threshold: 0.05, Period: 5 * time.Minute},
			Retention:      24 * time.Hour,
		},
		Clock: clock.RealClock{},
	}
}

func scrapeErrorCount(t *testing.T, cluster, reason string) float64 {
	t.Helper()
	v, err := testutil.GetCounterMetricValue(scrapeErrors.WithLabelValues(cluster, reason))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestMain(m *testing.M) {
	RegisterMetrics()
	os.Exit(pgtest.RunTests(m))
}
