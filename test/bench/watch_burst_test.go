package bench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/example/platform-apiserver/pkg/generated/clientset/versioned/scheme"
	"github.com/example/platform-apiserver/pkg/registry/store"
)

const (
	burstWatchers = 1000
	burstBatch    = 500 // node changes per Apply
	// burstLabel numbers the bursts: every change of burst r sets it to r.
	burstLabel       = "bench.platform.example.io/burst"
	burstTimeout     = 15 * time.Minute       // one burst to every watcher
	burstReadBuffer  = 64 << 10               // one watch event (a NodeCapacity is ~1.7 KB)
	burstQuiet       = 2 * time.Second        // nothing may arrive after the burst
	burstReopenPause = 100 * time.Millisecond // before re-opening a refused watch
	// Goal from the issue: p99 ≤ 500 ms and no watcher dropped.
	maxBurstP99 = 500 * time.Millisecond
)

// burstRounds counts this binary's bursts, so each changes every node (the
// store skips a write that changes nothing).
var burstRounds int

// BenchmarkWatchBurst opens burstWatchers raw watches of every NodeCapacity
// on the platform-apiserver's own port and makes one burst per run: every
// seeded node changed in Applies of burstBatch, until every watcher has
// every change. A closed watch resumes as a reflector does and is counted;
// a gap, a duplicate, an error event or a 410 fails the run. See
// docs/benchmarks.md, "BenchmarkWatchBurst".
func BenchmarkWatchBurst(b *testing.B) {
	e := setup(b)
	b.Run(fmt.Sprintf("watchers=%d", burstWatchers), func(b *testing.B) { benchBurst(b, e, burstWatchers) })
}

func benchBurst(b *testing.B, e *env, n int) {
	ctx := b.Context()
	bs, err := e.openBurstWatches(ctx, n)
	if bs != nil {
		defer func() {
			ctx := context.WithoutCancel(ctx)
			if err := e.closeWatches(ctx, bs.g); err != nil {
				b.Error(err)
			}
			// What the burst leaves behind once its watches are gone.
			if err := e.heapProfile(ctx, "platform-apiserver.burst.heap.pprof", true); err != nil {
				b.Error(err)
			}
		}()
	}
	must(b, err)

	before, err := e.watchCounters(ctx)
	must(b, err)
	// One burst per run, whatever -benchtime says (it takes minutes).
	var op burstOp
	loopOnce(b, func() {
		op, err = bs.burst(ctx)
		must(b, err)
	})
	b.StopTimer()
	must(b, sleepCtx(ctx, burstQuiet))
	must(b, bs.expectQuiet())
	after, err := e.watchCounters(ctx)
	must(b, err)
	lat := op.hist.summary()
	events := float64(n) * nodeCount
	platformPerEvent := float64(op.platformCPU) / float64(time.Microsecond) / events
	clientPerEvent := float64(op.clientCPU) / float64(time.Microsecond) / events
	platformCores, clientCores := float64(op.platformCPU)/float64(op.drain), float64(op.clientCPU)/float64(op.drain)
	closedBehind, endedEarly := after.closedBehind-before.closedBehind, bs.endedEarly.Load()

	b.ReportMetric(0, "ns/op") // one burst per run; burst-s is its length
	b.ReportMetric(op.drain.Seconds(), "burst-s")
	lat.report(b, "", true)
	b.ReportMetric(ms(op.write), "write-ms")
	b.ReportMetric(events/op.drain.Seconds(), "events/s")
	b.ReportMetric(closedBehind, "closed-behind")
	b.ReportMetric(float64(endedEarly), "ended-early")
	b.ReportMetric(after.databaseReads-before.databaseReads, "history-db-reads")
	b.ReportMetric(platformPerEvent, "platform-cpu-us/event")
	b.ReportMetric(clientPerEvent, "client-cpu-us/event")
	b.ReportMetric(platformCores, "platform-cores")
	e.reportPlatformMemory(b)
	must(b, e.reportPlatformHeap(b))

	section := fmt.Sprintf("watch burst: %d changes (Applies of %d) to %d watchers on the platform-apiserver's port (goal: p99 ≤ %s, no watcher dropped)", nodeCount, burstBatch, n, maxBurstP99)
	summary.printf(section, "commit→client %s events  %s", lat, verdict(lat.p99 <= maxBurstP99))
	summary.printf(section, "dropped: %.0f closed by the server for falling behind, %d watches ended early on the client side (all resumed; %.0f resuming watches, history %.0f from memory, %.0f from the database; %d re-opens refused)  %s",
		closedBehind, endedEarly, after.resumes-before.resumes, after.memoryReads-before.memoryReads, after.databaseReads-before.databaseReads,
		bs.reopenErrors.Load(), verdict(closedBehind == 0 && endedEarly == 0))
	summary.printf(section, "write %s, every event delivered %s after the first Apply began, %.0f events/s; platform-apiserver %.1f µs CPU per delivered event (%.2f cores), clients %.1f µs (%.2f cores)",
		op.write.Round(time.Millisecond), op.drain.Round(time.Millisecond), events/op.drain.Seconds(), platformPerEvent, platformCores, clientPerEvent, clientCores)
}

// burstSet is the burst's watchers, each reading one raw JSON stream.
type burstSet struct {
	e        *env
	g        *watchGroup
	watchers []*burstWatcher
	notes    chan burstNote // a watcher's completion of a burst, or its error
	// Watches that ended before close (each resumed), and refused re-opens.
	endedEarly, reopenErrors atomic.Int64
	round                    int       // the burst in flight
	base                     time.Time // the clock of every receipt and commit
}

type burstNote struct {
	watcher int
	err     error
}

// burstWatcher is one watch and what it received of the current burst.
type burstWatcher struct {
	i      int
	client rest.Interface
	mu     sync.Mutex
	lastRV int64
	round  int
	recv   []time.Duration // node i's change's arrival since base; 0: not yet
	got    int
}

// openBurstWatches opens n raw watches from a listed resourceVersion,
// watchersPerClient per transport, and checks the server serves n.
func (e *env) openBurstWatches(ctx context.Context, n int) (*burstSet, error) {
	_, from, err := latestRV(ctx, e.direct)
	if err != nil {
		return nil, err
	}
	bs := &burstSet{e: e, g: newWatchGroup(ctx), notes: make(chan burstNote, n), base: time.Now()}
	clients, err := bs.g.clients(e.cp.PlatformDirectConfig, n, nil)
	if err != nil {
		return bs, err
	}
	bs.watchers = make([]*burstWatcher, n)
	err = parallel(ctx, openWorkers, n, func(_ context.Context, i int) error {
		w := &burstWatcher{i: i, client: clients[i/watchersPerClient].PlatformV1alpha1().RESTClient(), lastRV: from, round: -1, recv: make([]time.Duration, nodeCount)}
		body, err := w.open(bs.g.ctx)
		if err != nil {
			return fmt.Errorf("open watch %d: %w", i, err)
		}
		bs.watchers[i] = w // each i its own element: no lock
		bs.g.goWatch(func(ctx context.Context) { bs.follow(ctx, w, body) })
		return nil
	})
	if err != nil {
		return bs, err
	}
	return bs, e.expectWatches(ctx, n)
}

// open watches every NodeCapacity after w.lastRV: JSON events, one a line.
func (w *burstWatcher) open(ctx context.Context) (io.ReadCloser, error) {
	w.mu.Lock()
	rv := w.lastRV
	w.mu.Unlock()
	opts := metav1.ListOptions{
		Watch:               true,
		ResourceVersion:     strconv.FormatInt(rv, 10),
		AllowWatchBookmarks: true,
		TimeoutSeconds:      new(watchRequestTimeout),
	}
	return w.client.Get().Resource("nodecapacities").VersionedParams(&opts, scheme.ParameterCodec).Stream(ctx)
}

// follow reads w's streams until the set closes, counting and re-opening
// from the last resourceVersion one that ends early.
func (bs *burstSet) follow(ctx context.Context, w *burstWatcher, body io.ReadCloser) {
	r := bufio.NewReaderSize(nil, burstReadBuffer)
	for {
		r.Reset(body)
		err := bs.read(ctx, w, r)
		body.Close()
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			deliver(ctx, bs.notes, burstNote{watcher: w.i, err: err})
			return
		}
		bs.endedEarly.Add(1)
		for {
			if body, err = w.open(ctx); err == nil {
				break
			}
			if ctx.Err() != nil {
				return
			}
			if expired(err) {
				deliver(ctx, bs.notes, burstNote{watcher: w.i, err: fmt.Errorf("resume: %w", err)})
				return
			}
			bs.reopenErrors.Add(1)
			if sleepCtx(ctx, burstReopenPause) != nil {
				return
			}
		}
	}
}

var (
	burstModified   = []byte(`{"type":"MODIFIED",`)
	burstBookmark   = []byte(`{"type":"BOOKMARK",`)
	burstRVField    = []byte(`"resourceVersion":"`)
	burstNameField  = []byte(`"name":"` + clusterID + `.node-`)
	burstLabelField = []byte(`"` + burstLabel + `":"`)
)

// read consumes one stream until it ends (nil) or an event is wrong.
func (bs *burstSet) read(ctx context.Context, w *burstWatcher, r *bufio.Reader) error {
	for {
		line, err := r.ReadSlice('\n')
		if err != nil {
			if errors.Is(err, bufio.ErrBufferFull) {
				return fmt.Errorf("a watch event longer than %d bytes", burstReadBuffer)
			}
			return nil // EOF, a reset stream, or the set closing
		}
		complete, err := w.event(line, time.Since(bs.base))
		if err != nil {
			return err
		}
		if complete && !deliver(ctx, bs.notes, burstNote{watcher: w.i}) {
			return nil
		}
	}
}

// event checks one event (a bookmark not going back, or the current burst's
// change of a node not yet received, after lastRV) and reports whether it
// was w's last of the burst.
func (w *burstWatcher) event(line []byte, at time.Duration) (bool, error) {
	rv, ok := field(line, burstRVField)
	if !ok {
		return false, fmt.Errorf("watch event without a resourceVersion: %.300s", line)
	}
	v, err := strconv.ParseInt(string(rv), 10, 64)
	if err != nil {
		return false, fmt.Errorf("watch event with resourceVersion %q: %w", rv, err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case bytes.HasPrefix(line, burstBookmark):
		if v < w.lastRV {
			return false, fmt.Errorf("bookmark at resourceVersion %d after %d", v, w.lastRV)
		}
		w.lastRV = v
		return false, nil
	case !bytes.HasPrefix(line, burstModified):
		return false, fmt.Errorf("unexpected watch event: %.300s", line)
	}
	if v <= w.lastRV {
		return false, fmt.Errorf("change at resourceVersion %d, not after %d", v, w.lastRV)
	}
	name, ok := field(line, burstNameField)
	node, err := strconv.Atoi(string(name))
	if !ok || err != nil || node < 0 || node >= nodeCount {
		return false, fmt.Errorf("MODIFIED event of an unexpected object at resourceVersion %d: %.300s", v, line)
	}
	label, _ := field(line, burstLabelField)
	if string(label) != strconv.Itoa(w.round) {
		return false, fmt.Errorf("change of node %d of burst %q at resourceVersion %d during burst %d", node, label, v, w.round)
	}
	if w.recv[node] != 0 {
		return false, fmt.Errorf("change of node %d of burst %d received twice (again at resourceVersion %d)", node, w.round, v)
	}
	w.recv[node] = max(at, 1)
	w.got++
	w.lastRV = v
	return w.got == nodeCount, nil
}

// field is the rest of the first string field of line that starts with
// prefix, up to its closing quote.
func field(line, prefix []byte) ([]byte, bool) {
	_, rest, ok := bytes.Cut(line, prefix)
	if !ok {
		return nil, false
	}
	if value, _, ok := bytes.Cut(rest, []byte{'"'}); ok {
		return value, true
	}
	return nil, false
}

type burstOp struct {
	hist                   latencies
	write, drain           time.Duration
	platformCPU, clientCPU time.Duration
}

// burst changes every seeded node and waits until every watcher has every
// change; latencies run from the return of the change's Apply.
func (bs *burstSet) burst(ctx context.Context) (burstOp, error) {
	var op burstOp
	bs.round = burstRounds
	burstRounds++
	for _, w := range bs.watchers {
		w.mu.Lock()
		w.round, w.got = bs.round, 0
		clear(w.recv)
		w.mu.Unlock()
	}
	e := bs.e
	platformPID, err := e.platformPID()
	if err != nil {
		return op, err
	}
	cpuBefore := cpuClock(platformPID, os.Getpid())

	start := time.Since(bs.base)
	commits := make([]time.Duration, (nodeCount+burstBatch-1)/burstBatch)
	for k := range commits {
		batch := store.Batch{ClusterID: clusterID}
		for i := k * burstBatch; i < min((k+1)*burstBatch, nodeCount); i++ {
			node := storeNode(i, e.seededAt)
			node.Labels[burstLabel] = strconv.Itoa(bs.round)
			batch.Nodes = append(batch.Nodes, node)
		}
		if err := e.registry.Apply(ctx, batch); err != nil {
			return op, fmt.Errorf("burst %d, apply batch %d: %w", bs.round, k, err)
		}
		commits[k] = time.Since(bs.base)
	}
	op.write = commits[len(commits)-1] - start

	done := 0
	err = receive(ctx, bs.notes, burstTimeout, func(note burstNote) (bool, error) {
		if note.err != nil {
			return false, fmt.Errorf("watcher %d, burst %d: %w", note.watcher, bs.round, note.err)
		}
		done++
		return done == len(bs.watchers), nil
	}, func() error {
		return fmt.Errorf("burst %d: %d of %d watchers received all %d changes within %s", bs.round, done, len(bs.watchers), nodeCount, burstTimeout)
	})
	if err != nil {
		return op, err
	}
	cpuAfter := cpuClock(platformPID, os.Getpid())
	op.platformCPU, op.clientCPU = cpuAfter[0]-cpuBefore[0], cpuAfter[1]-cpuBefore[1]

	var last time.Duration
	for _, w := range bs.watchers {
		w.mu.Lock()
		for node, at := range w.recv {
			op.hist.add(max(0, at-commits[node/burstBatch]))
			last = max(last, at)
		}
		w.mu.Unlock()
	}
	op.drain = last - start
	return op, nil
}

// expectQuiet fails if a watcher reported anything after the burst.
func (bs *burstSet) expectQuiet() error {
	return expectNothing(bs.notes, func(note burstNote) error {
		if note.err != nil {
			return fmt.Errorf("watcher %d: %w", note.watcher, note.err)
		}
		return fmt.Errorf("watcher %d completed a burst twice", note.watcher)
	})
}
