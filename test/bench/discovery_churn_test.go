package bench

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/example/platform-apiserver/pkg/apis/platform/v1alpha1"
)

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
)

// maxFreshnessP99 is the goal for a change's way from kube-apiserver
// to our API.
const maxFreshnessP99 = time.Second

// churnNamespace is the j-th churned namespace, spread over the seeded ones.
func churnNamespace(j int) string {
	return syncNamespaceName(j * (syncNamespaces / churnNamespaces))
}

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
	snap, err := d.snapshot(ctx)
	must(b, err)
	begin := time.Now()
	hist := loopLatencies(b, func() ([]time.Duration, error) {
		return d.churn(ctx, receipts, int(churnWindow.Seconds())*churnRate)
	})
	elapsed := time.Since(begin)
	cpuAfter := cpuClock(pid)
	lagAfter, err := d.commitLag(ctx)
	must(b, err)
	// The restart benchmark's count of written rows, checked against a
	// run that writes: the churned namespaces' rows, one version a change.
	rows, rvDelta, err := d.rowsWrittenSince(ctx, snap)
	must(b, err)
	fmt.Fprintf(os.Stderr, "discovery: the churn wrote %d rows, resourceVersion +%d\n", rows, rvDelta)
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
		ns := churnNamespace(seq % churnNamespaces)
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
	if err == nil && l.count == 0 {
		fmt.Fprintln(os.Stderr, "discovery: the server reports no commit lag of namespaces yet")
	}
	return l, err
}
