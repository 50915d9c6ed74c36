package bench

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/example/platform-apiserver/pkg/generated/clientset/versioned"
	registrypostgres "github.com/example/platform-apiserver/pkg/registry/postgres"
	"github.com/example/platform-apiserver/pkg/registry/store"
	"github.com/example/platform-apiserver/test/framework"
	"github.com/example/platform-apiserver/test/framework/postgres"
)

// standbyReaders clients list at once: enough to keep two servers busy.
const standbyReaders = 4

// standbyEnv's registry is a primary with a streaming standby; the
// framework's platform-apiserver runs discovery (nodeCount Nodes) and reads
// the primary only, a second replica (withStandby, its port; standbyStore
// reads as it does) the standby too.
type standbyEnv struct {
	*env
	replica      *framework.FleetReplica
	withStandby  versioned.Interface
	standbyStore *registrypostgres.Store
}

func startStandbyEnv(b *testing.B) *standbyEnv {
	s := &standbyEnv{}
	s.env = benchEnv(b, envOptions{name: "standby", standby: true, platformArgs: discoveryArgs, prepare: func(ctx context.Context, e *env) error {
		s.env = e
		return s.prepare(ctx)
	}})
	return s
}

func (s *standbyEnv) prepare(ctx context.Context) error {
	s.cleanups = append(s.cleanups, s.stop)
	var err error
	if s.standbyStore, err = registrypostgres.Open(ctx, s.cp.DatabaseURL(), registrypostgres.Options{ReadDSNs: []string{s.standby.DSN()}}); err != nil {
		return err
	}
	if err := s.createKubeNodes(ctx, time.Now().UTC().Truncate(time.Second)); err != nil {
		return err
	}
	err = wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
		n, err := listNodeCapacities(s.direct)(ctx)
		return err == nil && n == nodeCount, nil
	})
	if err != nil {
		return fmt.Errorf("discovery did not mirror %d nodes: %w", nodeCount, err)
	}
	if s.replica, err = s.cp.StartFleetReplica(ctx, "platform-apiserver-standby", []string{"--postgres-read-dsn=" + s.standby.DSN()}, 2*time.Minute); err != nil {
		return err
	}
	cfg := s.cp.PlatformDirectConfig()
	cfg.Host = s.replica.URL()
	s.withStandby, err = versioned.NewForConfig(jsonConfig(cfg))
	return err
}

func (s *standbyEnv) stop() error {
	if s.standbyStore != nil {
		s.standbyStore.Close()
	}
	if s.replica != nil {
		return s.replica.Stop()
	}
	return nil
}

// BenchmarkStandby measures what a streaming standby buys (issue 13), each
// pair back to back: standbyReaders concurrent lists from a store (reads=store)
// or a replica's port (reads=api) on the primary only vs with the standby,
// and a failover (once per environment). See docs/benchmarks.md.
func BenchmarkStandby(b *testing.B) {
	s := startStandbyEnv(b)
	storeList := func(st *registrypostgres.Store) func(context.Context) (int, error) {
		return func(ctx context.Context) (int, error) {
			page, err := st.NodeCapacities().List(ctx, store.ListOptions{Freshness: store.Freshness{Latest: true}})
			if err != nil {
				return 0, err
			}
			return len(page.Items), nil
		}
	}
	for _, side := range []struct {
		reads, server string
		list          func(context.Context) (int, error)
		metrics       func(context.Context) (string, error)
	}{
		{"store", "primary", storeList(s.registry), nil},
		{"store", "primary+standby", storeList(s.standbyStore), nil},
		{"api", "primary", listNodeCapacities(s.direct), s.cp.PlatformMetrics},
		{"api", "primary+standby", listNodeCapacities(s.withStandby), s.replica.Metrics},
	} {
		b.Run("reads="+side.reads+"/cpus=shared/server="+side.server, func(b *testing.B) {
			var before float64
			if side.metrics != nil {
				before = standbyReadsOf(b, side.metrics)
			}
			s.benchLists(b, side.list)
			if side.metrics != nil {
				b.ReportMetric((standbyReadsOf(b, side.metrics)-before)/float64(standbyReaders*b.N), "standby-reads/list")
			}
		})
	}
	// The registry's reads with each server on a core of its own.
	if runtime.NumCPU() >= 2 {
		must(b, s.pin([]int{0}, []int{1}))
		for _, side := range []struct {
			server string
			st     *registrypostgres.Store
		}{{"primary", s.registry}, {"primary+standby", s.standbyStore}} {
			b.Run("reads=store/cpus=one-per-server/server="+side.server, func(b *testing.B) {
				s.benchLists(b, storeList(side.st))
			})
		}
		all := make([]int, runtime.NumCPU())
		for i := range all {
			all[i] = i
		}
		must(b, s.pin(all, all))
	}
	b.Run("failover", func(b *testing.B) { loopOnce(b, func() { s.failover(b) }) })
}

// benchLists runs benchParallelLists and reports each database server's CPU per list.
func (s *standbyEnv) benchLists(b *testing.B, list func(context.Context) (int, error)) {
	primary, standby := serverCPU(s.pg), serverCPU(s.standby.Instance)
	benchParallelLists(b, list)
	lists := float64(standbyReaders * b.N)
	b.ReportMetric(float64((serverCPU(s.pg)-primary).Milliseconds())/lists, "primary-cpu-ms/list")
	b.ReportMetric(float64((serverCPU(s.standby.Instance)-standby).Milliseconds())/lists, "standby-cpu-ms/list")
}

// serverCPU sums the CPU time inst's processes have used, skipping those gone.
func serverCPU(inst *postgres.Instance) (total time.Duration) {
	for _, t := range cpuClock(inst.Pids()...) {
		total += t
	}
	return total
}

func (s *standbyEnv) pin(primary, standby []int) error {
	if err := s.pg.PinToCPUs(primary...); err != nil {
		return err
	}
	return s.standby.PinToCPUs(standby...)
}

func standbyReadsOf(b *testing.B, metrics func(context.Context) (string, error)) float64 {
	var n float64
	must(b, readCounters(b.Context(), metrics, counter{&n, "platform_registry_reads_total", []string{`server="standby"`}}))
	return n
}

// benchParallelLists lists standbyReaders×b.N times from standbyReaders
// goroutines and reports lists/s.
func benchParallelLists(b *testing.B, list func(context.Context) (int, error)) {
	ctx := b.Context()
	_, err := list(ctx)
	must(b, err)
	var left atomic.Int64
	left.Store(int64(standbyReaders * b.N))
	var wg sync.WaitGroup
	b.ResetTimer()
	for range standbyReaders {
		wg.Go(func() {
			for left.Add(-1) >= 0 {
				n, err := list(ctx)
				if err != nil {
					b.Error(err)
					return
				}
				if n != nodeCount {
					b.Errorf("listed %d NodeCapacities, want %d", n, nodeCount)
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(standbyReaders*b.N)/b.Elapsed().Seconds(), "lists/s")
}

// failover kills the primary, promotes the standby and measures until the
// API lists again and a watcher sees a change made after.
func (s *standbyEnv) failover(b *testing.B) {
	ctx := b.Context()
	w, err := s.openMarkerWatch(ctx, s.cp.PlatformServerURL(), "failover")
	must(b, err)
	defer w.g.close()
	killed := time.Now()
	must(b, s.pg.Kill())
	must(b, s.standby.Promote(ctx))
	promoted := time.Since(killed)
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := s.direct.PlatformV1alpha1().NodeCapacities().List(ctx, metav1.ListOptions{Limit: 1})
		return err == nil, nil
	})
	if err != nil {
		b.Fatalf("no list answered after the failover: %v", err)
	}
	listed := time.Since(killed)

	// A member change, made again until the watcher sees it.
	var seen time.Time
	for attempt := 0; seen.IsZero(); attempt++ {
		label := strconv.Itoa(attempt)
		must(b, s.relabel(ctx, "nodes", nodeName(7), "failover", label))
		seen, _ = w.await(ctx, label, 2*time.Second)
		if time.Since(killed) > 5*time.Minute {
			b.Fatal("no watcher saw a change made after the failover within 5 minutes")
		}
	}
	b.ReportMetric(promoted.Seconds(), "promote-s")
	b.ReportMetric(listed.Seconds(), "lists-again-s")
	b.ReportMetric(seen.Sub(killed).Seconds(), "watch-event-s")
}
