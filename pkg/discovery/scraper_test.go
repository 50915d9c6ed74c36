package discovery

import (
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/component-base/metrics/testutil"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"
	metricsfake "k8s.io/metrics/pkg/client/clientset/versioned/fake"
	"k8s.io/utils/clock"

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
	nodes := []store.Node{{Name: "a", Ready: true}, {Name: "b", Ready: true}, {Name: "c", Ready: true}}
	if err := reg.Apply(ctx, store.Batch{ClusterID: "m", Nodes: nodes}); err != nil {
		t.Fatal(err)
	}
	at := time.Now().UTC().Truncate(time.Second)
	bad := nodeMetrics("c", "1", "1Gi", at)
	bad.Usage["cpu"] = resource.MustParse("-5m") // malformed: skipped, the others stored
	list := &metricsv1beta1.NodeMetricsList{Items: []metricsv1beta1.NodeMetrics{
		*nodeMetrics("a", "1500000u", "2G", at), // micro-cores and decimal giga occur in real metrics
		*nodeMetrics("b", "250m", "512Mi", at),
		*bad,
	}}
	// The fake's object tracker files NodeMetrics under a guessed resource
	// name, not "nodes"; answer the list directly.
	client := metricsfake.NewSimpleClientset()
	client.PrependReactor("list", "nodes", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, list, nil
	})
	s := newScraper(scraperParams{ClusterID: "m", Client: client, Store: reg, Interval: time.Minute, Retention: time.Hour, Clock: clock.RealClock{}})

	if n := s.scrapeOnce(ctx); n != 2 {
		t.Fatalf("first scrape stored %d samples, want 2", n)
	}
	if n := s.scrapeOnce(ctx); n != 0 {
		t.Errorf("a repeated scrape of the same samples stored %d, want 0 (ON CONFLICT DO NOTHING)", n)
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
		t.Errorf("node c (malformed sample) usage = %+v, %v; want unknown", nc.Usage, err)
	}
}

// TestScraperWithoutMetricsAPI keeps going when metrics.k8s.io is absent.
func TestScraperWithoutMetricsAPI(t *testing.T) {
	ctx := t.Context()
	client := metricsfake.NewSimpleClientset()
	client.PrependReactor("list", "nodes", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewNotFound(schema.GroupResource{Group: "metrics.k8s.io", Resource: "nodes"}, "")
	})
	st := &recordingStore{}
	s := newScraper(scraperParams{ClusterID: "m", Client: client, Store: st, Interval: time.Minute, Retention: time.Hour, Clock: clock.RealClock{}})
	before := scrapeErrorCount(t, "m", "metrics_api_absent")
	if n := s.scrapeOnce(ctx); n != 0 {
		t.Errorf("stored %d samples without a metrics API", n)
	}
	if got := scrapeErrorCount(t, "m", "metrics_api_absent") - before; got != 1 {
		t.Errorf("metrics_api_absent errors counted %v times, want 1", got)
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
