package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/example/platform-apiserver/pkg/apis/platform/v1alpha1"
	"github.com/example/platform-apiserver/pkg/generated/clientset/versioned"
	registrypostgres "github.com/example/platform-apiserver/pkg/registry/postgres"
	"github.com/example/platform-apiserver/pkg/registry/store"
	"github.com/example/platform-apiserver/test/framework"
	"github.com/example/platform-apiserver/test/framework/postgres"
)

// standbyReaders is how many clients list at once in BenchmarkStandby:
// enough to keep two database servers busy.
const standbyReaders = 4

// standbyEnv is a control plane whose registry is a primary with one
// streaming standby (a multi-host DSN with target_session_attrs=read-write,
// so it follows a promotion). The framework's platform-apiserver runs
// discovery of its own kube-apiserver (nodeCount Nodes) and reads from the
// primary only; a second replica reads from the standby too.
type standbyEnv struct {
	*env
	standby *postgres.Standby
	replica *framework.FleetReplica
	// withStandby is the second replica's own port.
	withStandby versioned.Interface
	// standbyStore reads like the second replica; env.registry like the first.
	standbyStore *registrypostgres.Store
}

func startStandbyEnv(ctx context.Context) (*standbyEnv, error) {
	ctx, cancel := context.WithTimeout(ctx, setupTimeout)
	defer cancel()
	workDir, err := os.MkdirTemp("", "platform-bench-standby-")
	if err != nil {
		return nil, err
	}
	s := &standbyEnv{env: &env{workDir: workDir}}
	if s.pg, err = postgres.Start(ctx, postgres.Options{}); err != nil {
		return s, fmt.Errorf("start PostgreSQL: %w", err)
	}
	if s.standby, err = s.pg.StartStandby(ctx, postgres.StandbyOptions{}); err != nil {
		return s, err
	}
	dsn := postgres.MultiHostDSN("", "read-write", s.pg, s.standby.Instance)
	s.cp, err = framework.Start(ctx, framework.Options{
		WorkDir:                 filepath.Join(workDir, "controlplane"),
		DatabaseURL:             dsn,
		PlatformAPIServerBinary: os.Getenv(envPlatformBinary),
		ExtraPlatformArgs:       discoveryArgs,
	})
	if err != nil {
		return s, err
	}
	if err := s.buildClients(); err != nil {
		return s, err
	}
	if s.registry, err = registrypostgres.Open(ctx, dsn, registrypostgres.Options{}); err != nil {
		return s, err
	}
	if s.standbyStore, err = registrypostgres.Open(ctx, dsn, registrypostgres.Options{ReadDSNs: []string{s.standby.DSN()}}); err != nil {
		return s, err
	}
	if err := s.createKubeNodes(ctx, time.Now().UTC().Truncate(time.Second)); err != nil {
		return s, err
	}
	err = wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
		n, err := listNodeCapacities(s.direct)(ctx)
		return err == nil && n == nodeCount, nil
	})
	if err != nil {
		return s, fmt.Errorf("discovery did not mirror %d nodes: %w", nodeCount, err)
	}
	if s.replica, err = s.cp.StartFleetReplica(ctx, "platform-apiserver-standby", []string{"--postgres-read-dsn=" + s.standby.DSN()}, 2*time.Minute); err != nil {
		return s, err
	}
	cfg := jsonConfig(s.cp.AdminConfig())
	cfg.Host, cfg.CAFile, cfg.CAData = s.replica.URL(), "", s.cp.PlatformServingCA()
	if s.withStandby, err = versioned.NewForConfig(cfg); err != nil {
		return s, err
	}
	return s, nil
}

func (s *standbyEnv) stop(keepLogs bool) error {
	var errs []error
	if s.standbyStore != nil {
		s.standbyStore.Close()
	}
	if s.replica != nil {
		errs = append(errs, s.replica.Stop())
	}
	if s.env != nil {
		errs = append(errs, s.env.stop(keepLogs))
	}
	if s.standby != nil {
		errs = append(errs, s.standby.Stop())
	}
	return errors.Join(errs...)
}

// BenchmarkStandby measures what a streaming standby buys (issue 13), with
// discovery running as in production (its scraper finds no metrics.k8s.io
// here; BenchmarkFleet measures scraping). Sub-benchmarks, each pair back
// to back on the same machine load:
//   - reads=store/server=primary vs server=primary+standby: standbyReaders
//     concurrent registry lists (an op is one list by each) of the nodeCount NodeCapacities, from a store
//     reading the primary only vs one spreading reads over the standby;
//   - reads=api/...: the same through each replica's own port with client-go
//     (JSON): the primary-only replica vs the one reading from the standby;
//   - failover: the primary is killed and the standby promoted; reports
//     seconds until a list through the API answers again and until a change
//     made in the member after the promotion reaches a watcher (once per
//     environment, whatever -benchtime).
func BenchmarkStandby(b *testing.B) {
	s, err := startStandbyEnv(context.Background())
	if err != nil {
		if s != nil {
			_ = s.stop(true)
		}
		b.Fatalf("standby benchmark setup: %v", err)
	}
	b.Cleanup(func() {
		if err := s.stop(b.Failed()); err != nil {
			b.Errorf("stop: %v", err)
		}
	})
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
	// Each server on a core of its own, as on machines of their own: the
	// registry's reads alone, since the replicas' own work (encoding 5,000
	// objects) needs the cores too.
	if runtime.NumCPU() >= 2 {
		if err := s.pin([]int{0}, []int{1}); err != nil {
			b.Fatal(err)
		}
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
		if err := s.pin(all, all); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("failover", func(b *testing.B) { s.benchFailover(b) })
}

// benchLists runs benchParallelLists and reports the CPU time each database
// server spent per list: what a server's own machine would pay, so the
// primary's share shows how much more it could serve.
func (s *standbyEnv) benchLists(b *testing.B, list func(context.Context) (int, error)) {
	primary, standby := serverCPU(s.pg), serverCPU(s.standby.Instance)
	benchParallelLists(b, list)
	lists := float64(standbyReaders * b.N)
	b.ReportMetric(float64((serverCPU(s.pg)-primary).Milliseconds())/lists, "primary-cpu-ms/list")
	b.ReportMetric(float64((serverCPU(s.standby.Instance)-standby).Milliseconds())/lists, "standby-cpu-ms/list")
}

// serverCPU is the CPU time the server's processes have used.
func serverCPU(inst *postgres.Instance) time.Duration {
	var total time.Duration
	for _, pid := range inst.Pids() {
		t, err := processCPUTime(pid)
		if err != nil {
			continue // a backend that just ended
		}
		total += t
	}
	return total
}

// pin restricts the primary and the standby to CPUs each.
func (s *standbyEnv) pin(primary, standby []int) error {
	if err := s.pg.PinToCPUs(primary...); err != nil {
		return err
	}
	return s.standby.PinToCPUs(standby...)
}

// standbyReadsOf reads a replica's platform_registry_reads_total{server="standby"}.
func standbyReadsOf(b *testing.B, metrics func(context.Context) (string, error)) float64 {
	body, err := metrics(b.Context())
	if err != nil {
		b.Fatal(err)
	}
	n, err := framework.MetricSum(body, "platform_registry_reads_total", `server="standby"`)
	if err != nil {
		b.Fatal(err)
	}
	return n
}

// benchParallelLists lists every NodeCapacity standbyReaders×b.N times
// from standbyReaders goroutines (an op is standbyReaders lists), and
// reports lists/s, the throughput.
func benchParallelLists(b *testing.B, list func(context.Context) (int, error)) {
	ctx := b.Context()
	if _, err := list(ctx); err != nil {
		b.Fatal(err)
	}
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

// benchFailover kills the primary, promotes the standby and measures how
// long until the API lists again and a watcher sees a change made after
// the promotion. An environment fails over once: the first iteration does,
// any further ones (-benchtime above 1x) are empty.
func (s *standbyEnv) benchFailover(b *testing.B) {
	for first := true; b.Loop(); first = false {
		if first {
			s.failover(b)
		}
	}
}

func (s *standbyEnv) failover(b *testing.B) {
	ctx := b.Context()
	ncs := s.direct.PlatformV1alpha1().NodeCapacities()
	list, err := ncs.List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		b.Fatal(err)
	}
	events := make(chan *v1alpha1.NodeCapacity, 1024)
	wctx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	go followNodeCapacities(wctx, s.direct, list.ResourceVersion, events)

	killed := time.Now()
	if err := s.pg.Kill(); err != nil {
		b.Fatal(err)
	}
	if err := s.standby.Promote(ctx); err != nil {
		b.Fatal(err)
	}
	promoted := time.Since(killed)
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := ncs.List(ctx, metav1.ListOptions{Limit: 1})
		return err == nil, nil
	})
	if err != nil {
		b.Fatalf("no list answered after the failover: %v", err)
	}
	listed := time.Since(killed)

	// A change in the member after the promotion, made again until a
	// watcher sees it: discovery must write it and the API watch serve it.
	node := nodeName(7)
	var watched time.Duration
	for attempt := 0; watched == 0; attempt++ {
		label := strconv.Itoa(attempt)
		patch := fmt.Sprintf(`{"metadata":{"labels":{"failover":%q}}}`, label)
		if _, err := s.kube.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			b.Fatal(err)
		}
		deadline := time.After(2 * time.Second)
	wait:
		for {
			select {
			case nc := <-events:
				if nc.Status.NodeName == node && nc.Labels["failover"] == label {
					watched = time.Since(killed)
					break wait
				}
			case <-deadline:
				break wait
			case <-ctx.Done():
				b.Fatal(ctx.Err())
			}
		}
		if time.Since(killed) > 5*time.Minute {
			b.Fatal("no watcher saw a change made after the failover within 5 minutes")
		}
	}
	b.ReportMetric(promoted.Seconds(), "promote-s")
	b.ReportMetric(listed.Seconds(), "lists-again-s")
	b.ReportMetric(watched.Seconds(), "watch-event-s")
}

// followNodeCapacities watches NodeCapacities from rv as a client would:
// resuming from the last version it saw, relisting after 410, and sends
// every object it receives to out.
func followNodeCapacities(ctx context.Context, c versioned.Interface, rv string, out chan<- *v1alpha1.NodeCapacity) {
	ncs := c.PlatformV1alpha1().NodeCapacities()
	for ctx.Err() == nil {
		w, err := ncs.Watch(ctx, metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true})
		if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
			rv = ""
			continue
		}
		if err != nil {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		for ev := range w.ResultChan() {
			if ev.Type == watch.Error {
				if st := apierrors.FromObject(ev.Object); apierrors.IsResourceExpired(st) || apierrors.IsGone(st) {
					rv = "" // a watch from "" starts at the present
				}
				break
			}
			if nc, ok := ev.Object.(*v1alpha1.NodeCapacity); ok {
				rv = nc.ResourceVersion
				if ev.Type != watch.Bookmark {
					select {
					case out <- nc:
					default:
					}
				}
			}
		}
		w.Stop()
	}
}
