package bench

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/example/platform-apiserver/pkg/apis/platform/v1alpha1"
	"github.com/example/platform-apiserver/test/framework"
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
	fw, err := d.watchClusterNamespaces(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer fw.close()
	// The first change proves the watch is established; not a sample.
	if _, err := d.churn(ctx, fw, 1); err != nil {
		b.Fatalf("first change: %v", err)
	}
	pid := d.cp.PlatformAPIServerPID()
	cpuBefore, err := processCPUTime(pid)
	if err != nil {
		b.Fatal(err)
	}
	lagBefore, err := d.commitLag(ctx)
	if err != nil {
		b.Fatal(err)
	}
	snap, err := d.snapshot(ctx)
	if err != nil {
		b.Fatal(err)
	}
	begin := time.Now()
	var latencies []time.Duration
	for b.Loop() {
		got, err := d.churn(ctx, fw, int(churnWindow.Seconds())*churnRate)
		if err != nil {
			b.Fatal(err)
		}
		latencies = append(latencies, got...)
	}
	elapsed := time.Since(begin)
	cpuAfter, err := processCPUTime(pid)
	if err != nil {
		b.Fatal(err)
	}
	lagAfter, err := d.commitLag(ctx)
	if err != nil {
		b.Fatal(err)
	}
	// The restart benchmark's count of written rows, checked against a
	// run that writes: the churned namespaces' rows, one version a change.
	rows, rvDelta, err := d.rowsWrittenSince(ctx, snap)
	if err != nil {
		b.Fatal(err)
	}
	fmt.Fprintf(os.Stderr, "discovery: the churn wrote %d rows, resourceVersion +%d\n", rows, rvDelta)
	lat := summarizeLatencies(latencies)
	res := freshnessResult{
		watchLatency: lat,
		rate:         float64(len(latencies)) / elapsed.Seconds(),
		cores:        float64(cpuAfter-cpuBefore) / float64(elapsed),
		commitLag:    lagAfter.since(lagBefore),
	}
	b.ReportMetric(0, "ns/op") // an op is a fixed window
	b.ReportMetric(ms(lat.p50), "p50-ms")
	b.ReportMetric(ms(lat.p99), "p99-ms")
	b.ReportMetric(ms(lat.max), "max-ms")
	b.ReportMetric(float64(lat.samples)/float64(b.N), "changes/op")
	b.ReportMetric(ms(res.commitLag), "commit-lag-ms")
	b.ReportMetric(res.cores, "platform-cores")
	discoveryResults.setFreshness(res)
}

// freshnessResult is what the freshness benchmark measured.
type freshnessResult struct {
	watchLatency
	// rate is the changes per second actually written.
	rate float64
	// cores is the platform-apiserver's CPU use during the churn.
	cores float64
	// commitLag is discovery's mean time from receiving a namespace event
	// to committing it (platform_discovery_commit_lag_seconds).
	commitLag time.Duration
}

// churn writes n changes, churnRate a second, round robin over the churned
// namespaces, then waits until each is visible through the watch and
// returns each change's latency.
func (d *discoveryEnv) churn(ctx context.Context, fw *nsWatch, n int) ([]time.Duration, error) {
	type change struct {
		seq     int
		written time.Time
	}
	pending := map[string][]change{}
	tick := time.NewTicker(time.Second / churnRate)
	defer tick.Stop()
	for k := range n {
		if k > 0 {
			select {
			case <-tick.C:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		seq := d.seq
		d.seq++
		ns := churnNamespace(seq % churnNamespaces)
		patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, churnLabel, strconv.Itoa(seq))
		if _, err := d.kube.CoreV1().Namespaces().Patch(ctx, ns, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			return nil, fmt.Errorf("label namespace %s: %w", ns, err)
		}
		pending[ns] = append(pending[ns], change{seq: seq, written: time.Now()})
	}

	latencies := make([]time.Duration, 0, n)
	timer := time.NewTimer(visibleTimeout)
	defer timer.Stop()
	for len(latencies) < n {
		select {
		case r := <-fw.receipts:
			if r.err != nil {
				return nil, r.err
			}
			waiting := pending[r.namespace]
			for len(waiting) > 0 && waiting[0].seq <= r.seq {
				// A receipt before the patch returned is possible in
				// principle; it counts as immediate.
				latencies = append(latencies, max(0, r.at.Sub(waiting[0].written)))
				waiting = waiting[1:]
			}
			pending[r.namespace] = waiting
		case <-timer.C:
			return nil, fmt.Errorf("%d of %d changes visible through the watch after %s", len(latencies), n, visibleTimeout)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return latencies, nil
}

// nsWatch is one watch of every ClusterNamespace through the aggregator and
// the goroutine that reads it.
type nsWatch struct {
	w         watch.Interface
	transport http.RoundTripper
	receipts  chan nsReceipt
	done      chan struct{}
	wg        sync.WaitGroup
}

// nsReceipt is the receipt of an event carrying change seq of a namespace,
// or the error that ended the watch.
type nsReceipt struct {
	namespace string
	seq       int
	at        time.Time
	err       error
}

// watchClusterNamespaces opens a watch of ClusterNamespaces in every
// namespace from now, on a connection of its own (env.watchClient).
func (d *discoveryEnv) watchClusterNamespaces(ctx context.Context) (*nsWatch, error) {
	c, rt, err := d.watchClient()
	if err != nil {
		return nil, err
	}
	list, err := c.PlatformV1alpha1().ClusterNamespaces("").List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		return nil, fmt.Errorf("list ClusterNamespaces for a resourceVersion: %w", err)
	}
	w, err := c.PlatformV1alpha1().ClusterNamespaces("").Watch(ctx, metav1.ListOptions{
		ResourceVersion:     list.ResourceVersion,
		AllowWatchBookmarks: true,
		TimeoutSeconds:      new(watchRequestTimeout),
	})
	if err != nil {
		return nil, fmt.Errorf("watch ClusterNamespaces: %w", err)
	}
	fw := &nsWatch{
		w: w, transport: rt,
		// Room for every receipt of a long run: the reader never blocks, so
		// its timestamps are the events' arrival.
		receipts: make(chan nsReceipt, 1<<16),
		done:     make(chan struct{}),
	}
	fw.wg.Add(1)
	go fw.follow()
	return fw, nil
}

func (fw *nsWatch) follow() {
	defer fw.wg.Done()
	for ev := range fw.w.ResultChan() {
		at := time.Now()
		switch ev.Type {
		case watch.Bookmark:
			continue
		case watch.Error:
			fw.send(nsReceipt{err: fmt.Errorf("watch error: %w", apierrors.FromObject(ev.Object))})
			return
		}
		cn, ok := ev.Object.(*v1alpha1.ClusterNamespace)
		if !ok {
			fw.send(nsReceipt{err: fmt.Errorf("%s event with a %T", ev.Type, ev.Object)})
			return
		}
		label, ok := cn.Labels[churnLabel]
		if !ok || cn.Name != discoveryClusterID {
			continue // not a churned namespace
		}
		seq, err := strconv.Atoi(label)
		if err != nil {
			fw.send(nsReceipt{err: fmt.Errorf("ClusterNamespace %s/%s has %s=%q", cn.Namespace, cn.Name, churnLabel, label)})
			return
		}
		if !fw.send(nsReceipt{namespace: cn.Namespace, seq: seq, at: at}) {
			return
		}
	}
	fw.send(nsReceipt{err: errors.New("watch ended")})
}

// send delivers r unless the watch is closing; it reports whether it did.
func (fw *nsWatch) send(r nsReceipt) bool {
	select {
	case fw.receipts <- r:
		return true
	case <-fw.done:
		return false
	}
}

func (fw *nsWatch) close() {
	close(fw.done)
	fw.w.Stop()
	fw.wg.Wait()
	utilnet.CloseIdleConnectionsFor(fw.transport)
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
	body, err := d.cp.PlatformMetrics(ctx)
	if err != nil {
		return l, err
	}
	labels := []string{`cluster="` + discoveryClusterID + `"`, `resource="namespaces"`}
	if l.sum, err = framework.MetricSum(body, "platform_discovery_commit_lag_seconds_sum", labels...); err != nil {
		return l, err
	}
	if l.count, err = framework.MetricSum(body, "platform_discovery_commit_lag_seconds_count", labels...); err != nil {
		return l, err
	}
	if l.count == 0 {
		fmt.Fprintln(os.Stderr, "discovery: the server reports no commit lag of namespaces yet")
	}
	return l, nil
}
