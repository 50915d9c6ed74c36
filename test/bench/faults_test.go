package bench

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/example/platform-apiserver/pkg/apis/platform/v1alpha1"
	"github.com/example/platform-apiserver/pkg/discovery/shard"
	registrypostgres "github.com/example/platform-apiserver/pkg/registry/postgres"
	"github.com/example/platform-apiserver/pkg/registry/store"
	"github.com/example/platform-apiserver/test/framework"
	"github.com/example/platform-apiserver/test/framework/postgres"
)

const (
	// primaryHang: past the feed's read timeout (10 s) and failed readiness,
	// short of the request timeout (60 s).
	primaryHang = 20 * time.Second
	// replicaHang: at least twice discovery's lease duration (15 s).
	replicaHang = 30 * time.Second

	faultLabel          = "bench.platform.example.io/fault-change" // its value numbers the change
	freshTimeout        = 3 * time.Minute                          // one change to reach a watch
	applyAttemptTimeout = time.Minute                              // discovery's ApplyTimeout
	replicaReadyTimeout = 2 * time.Minute                          // a replica's start, migrations included
)

// BenchmarkFaultRecovery measures, for each fault of docs/faults.md made
// here, the time from the fault's end (for a lost replica, the fault) until
// a change made after it reaches a watch opened before it: one run per
// iteration, p50 and max reported. See docs/benchmarks.md, "Time to fresh".
func BenchmarkFaultRecovery(b *testing.B) {
	e := benchEnv(b, envOptions{name: "faults"})
	b.Run("fault=primary-hung-then-back", func(b *testing.B) { benchPrimaryHungThenBack(b, e) })
	for _, f := range []primaryFault{
		{name: "hung-standby-promoted", replica: "hung-promoted", perRun: true, freshWriter: true, make: promoteAfter(hang)},
		{name: "hung-standby-promoted-lost-commits", replica: "hung-promoted-lost-commits", perRun: true, freshWriter: true, make: promoteAfter(hangLosingCommits)},
		{name: "killed-restarted", replica: "primary-killed", make: killAndRestart, endMetric: "s-to-restart"},
		// A failover without lost commits: a fast shutdown sends every
		// commit to the standby before the primary exits.
		{name: "stopped-standby-promoted", replica: "stopped-promoted", perRun: true, make: promoteAfter(stop)},
	} {
		b.Run("fault=primary-"+f.name, func(b *testing.B) { benchPrimaryFault(b, e, f) })
	}
	b.Run("fault=replica-hung-past-lease", func(b *testing.B) { benchReplicaHung(b, e) })
	b.Run("fault=replica-killed", func(b *testing.B) { benchReplicaKilled(b, e) })
}

// benchPrimaryHungThenBack: the primary SIGSTOPped for primaryHang, a change
// committed during the hang, SIGCONT, another change; s-to-fresh is from
// SIGCONT until both reached the watch.
func benchPrimaryHungThenBack(b *testing.B, e *env) {
	ctx := b.Context()
	r := startFaultRegistry(b, e, "platform-apiserver-primary-hung")
	rec := recovery{}
	for b.Loop() {
		must(b, r.beforeFault(ctx))
		must(b, r.primary.Freeze())
		during := r.next()
		duringErr := make(chan error, 1)
		go func() {
			_, err := r.commit(ctx, r.writer, during)
			duringErr <- err
		}()
		must(b, sleepCtx(ctx, primaryHang))
		must(b, r.primary.Thaw())
		back := time.Now()
		after := r.next()
		committed, err := r.commit(ctx, r.writer, after)
		must(b, err)
		must(b, <-duringErr)
		seenDuring, err := r.watch.await(ctx, during, freshTimeout)
		must(b, err)
		seenAfter, err := r.watch.await(ctx, after, freshTimeout)
		must(b, err)
		rec.add("s-to-fresh", max(seenDuring.Sub(back), seenAfter.Sub(back)))
		rec.add("s-to-commit", committed.Sub(back))
	}
	rec.report(b)
}

// primaryFault is a fault of the primary that make ends: s-to-fresh is from
// its end until a change committed after it reached the watch; endMetric
// (else s-to-commit, from its end to the commit) from its start to its end.
type primaryFault struct {
	name, replica string
	perRun        bool // a registry of its own each run
	// freshWriter: the change is written by a store opened after the fault,
	// as discovery's next commit is on a new connection.
	freshWriter bool
	make        func(context.Context, *faultRegistry) error
	endMetric   string
}

func benchPrimaryFault(b *testing.B, e *env, f primaryFault) {
	ctx := b.Context()
	rec := recovery{}
	var shared *faultRegistry
	if !f.perRun {
		shared = startFaultRegistry(b, e, "platform-apiserver-"+f.replica)
	}
	for run := 1; b.Loop(); run++ {
		func() {
			r := shared
			if r == nil {
				r = startFaultRegistry(b, e, fmt.Sprintf("platform-apiserver-%s-%d", f.replica, run))
				defer stopFaultRegistry(b, r)
			}
			must(b, r.beforeFault(ctx))
			began := time.Now()
			must(b, f.make(ctx, r))
			ended := time.Now()
			w := r.writer
			if f.freshWriter {
				var err error
				w, err = registrypostgres.Open(ctx, r.dsn, registrypostgres.Options{})
				must(b, err)
				defer w.Close()
			}
			committed, seen, err := r.commitAndAwait(ctx, w)
			must(b, err)
			rec.add("s-to-fresh", seen.Sub(ended))
			if f.endMetric != "" {
				rec.add(f.endMetric, ended.Sub(began))
			} else {
				rec.add("s-to-commit", committed.Sub(ended))
			}
		}()
	}
	rec.report(b)
}

func promoteAfter(fault func(context.Context, *faultRegistry) error) func(context.Context, *faultRegistry) error {
	return func(ctx context.Context, r *faultRegistry) error {
		if err := fault(ctx, r); err != nil {
			return err
		}
		return r.standby.Promote(ctx)
	}
}

func hang(_ context.Context, r *faultRegistry) error { return r.primary.Freeze() }

func stop(_ context.Context, r *faultRegistry) error { return r.primary.Pause() } // fast shutdown

// hangLosingCommits hangs the primary after a last change the standby
// missed (stopped, then started again): the promotion loses it.
func hangLosingCommits(ctx context.Context, r *faultRegistry) error {
	if err := r.standby.Pause(); err != nil {
		return err
	}
	if _, _, err := r.commitAndAwait(ctx, r.writer); err != nil {
		return err
	}
	if err := r.primary.Freeze(); err != nil {
		return err
	}
	return r.standby.Resume(ctx)
}

// killAndRestart SIGKILLs the primary and starts it again on its data (crash
// recovery); it ends when the server accepts connections.
func killAndRestart(ctx context.Context, r *faultRegistry) error {
	if err := r.primary.Kill(); err != nil {
		return err
	}
	return r.primary.Resume(ctx)
}

// benchReplicaHung: the replica holding the member SIGSTOPped for
// replicaHang (and until the other took it over), then SIGCONT. s-to-fresh
// is from SIGSTOP until a member change reached the other's watch,
// woken-s-to-fresh from SIGCONT until one reached the woken replica's.
func benchReplicaHung(b *testing.B, e *env) {
	m := startFaultMember(b, e, "platform-apiserver-replica-hung")
	rec := recovery{}
	for b.Loop() {
		rec.replicaHung(b, m)
	}
	rec.report(b)
}

func (rec recovery) replicaHung(b *testing.B, m *faultMember) {
	ctx := b.Context()
	victim, survivor := m.beforeFault(b)
	pid := victim.PID()
	if pid == 0 { // kill(0) would stop this process group
		b.Fatalf("%s has exited", victim.Name())
	}
	must(b, syscall.Kill(pid, syscall.SIGSTOP))
	stopped := time.Now()
	defer func() { _ = syscall.Kill(pid, syscall.SIGCONT) }() // also when a step below fails
	takenOver, err := m.changeSeenBy(ctx, survivor)
	must(b, err)
	must(b, sleepCtx(ctx, time.Until(stopped.Add(replicaHang))))
	must(b, syscall.Kill(pid, syscall.SIGCONT))
	woke := time.Now()
	seen, err := m.changeSeenBy(ctx, victim)
	must(b, err)
	rec.add("s-to-fresh", takenOver.Sub(stopped))
	rec.add("woken-s-to-fresh", seen.Sub(woke))
}

// benchReplicaKilled: the replica holding the member SIGKILLed; s-to-fresh
// until a member change reached the other's watch. A new replica replaces it.
func benchReplicaKilled(b *testing.B, e *env) {
	ctx := b.Context()
	m := startFaultMember(b, e, "platform-apiserver-replica-killed")
	rec := recovery{}
	for b.Loop() {
		victim, survivor := m.beforeFault(b)
		killed := time.Now()
		must(b, victim.Kill())
		takenOver, err := m.changeSeenBy(ctx, survivor)
		must(b, err)
		rec.add("s-to-fresh", takenOver.Sub(killed))
		must(b, m.replace(ctx, victim))
	}
	rec.report(b)
}

// startFaultRegistry starts a fault registry (the replica named name),
// stopped when b ends, and returns once a first change has reached the watch.
func startFaultRegistry(b *testing.B, e *env, name string) *faultRegistry {
	ctx := b.Context()
	r := &faultRegistry{node: storeNode(0, time.Now().UTC().Truncate(time.Second))}
	b.Cleanup(func() { stopFaultRegistry(b, r) })
	var err error
	r.primary, err = postgres.Start(ctx, postgres.Options{})
	must(b, err)
	r.standby, err = r.primary.StartStandby(ctx, postgres.StandbyOptions{})
	must(b, err)
	r.dsn = postgres.MultiHostDSN("", "read-write", r.primary, r.standby.Instance)
	r.replica, err = e.cp.StartFleetReplica(ctx, name, []string{"--postgres-dsn=" + r.dsn}, replicaReadyTimeout)
	must(b, err)
	r.writer, err = registrypostgres.Open(ctx, r.dsn, registrypostgres.Options{})
	must(b, err)
	r.watch, err = e.openMarkerWatch(ctx, r.replica.URL(), faultLabel)
	must(b, err)
	_, _, err = r.commitAndAwait(ctx, r.writer)
	must(b, err)
	return r
}

// stopFaultRegistry stops r once (a run's defer and b's cleanup both call it).
func stopFaultRegistry(b *testing.B, r *faultRegistry) {
	if r.stopped {
		return
	}
	r.stopped = true
	if err := r.stop(); err != nil {
		b.Errorf("stop a fault registry: %v", err)
	}
}

// startFaultMember creates the member's Node (unless it exists) and starts
// the replica faults' two replicas, stopped when b ends.
func startFaultMember(b *testing.B, e *env, prefix string) *faultMember {
	ctx := b.Context()
	m := &faultMember{e: e, prefix: prefix}
	b.Cleanup(func() {
		if err := m.stop(); err != nil {
			b.Errorf("stop replicas: %v", err)
		}
	})
	now := time.Now().UTC().Truncate(time.Second)
	if _, err := e.kube.CoreV1().Nodes().Create(ctx, kubeNode(0, storeNode(0, now), now), metav1.CreateOptions{}); !apierrors.IsAlreadyExists(err) {
		must(b, err)
	}
	for i := range m.replicas {
		r, err := m.startReplica(ctx)
		must(b, err)
		m.replicas[i] = r
	}
	return m
}

// beforeFault waits until both replicas watch the mirrored member and
// returns the one holding it and the other.
func (m *faultMember) beforeFault(b *testing.B) (holding, other *discoveryReplica) {
	b.Helper()
	must(b, m.settle(b.Context()))
	i, err := m.holder(b.Context())
	must(b, err)
	return m.replicas[i], m.replicas[1-i]
}

// recovery is each metric's duration per run.
type recovery map[string][]time.Duration

func (r recovery) add(metric string, d time.Duration) { r[metric] = append(r[metric], d) }

func (r recovery) report(b *testing.B) {
	for metric, samples := range r {
		var h latencies
		h.add(samples...)
		b.ReportMetric(h.quantile(0.5).Seconds(), metric+"-p50")
		b.ReportMetric(h.max.Seconds(), metric+"-max")
	}
}

// markerWatch watches every NodeCapacity on one server's own port through a
// fault, noting when each value of its label first arrives. It resumes as
// reflectors do.
type markerWatch struct {
	g     *watchGroup
	label string
	mu    sync.Mutex
	seen  map[string]time.Time
}

// openMarkerWatch watches the server at serverURL for label, from a listed
// resourceVersion, on a connection of its own.
func (e *env) openMarkerWatch(ctx context.Context, serverURL, label string) (*markerWatch, error) {
	w := &markerWatch{g: newWatchGroup(ctx), label: label, seen: map[string]time.Time{}}
	cfg := e.cp.PlatformDirectConfig()
	cfg.Host = serverURL
	c, err := w.g.client(cfg, nil)
	if err != nil {
		return nil, err
	}
	rv, _, err := latestRV(ctx, c)
	if err != nil {
		w.g.close()
		return nil, fmt.Errorf("%s: %w", serverURL, err)
	}
	f := follower{open: c.PlatformV1alpha1().NodeCapacities().Watch, event: w.event, ended: func(error) bool { return true }}
	w.g.goWatch(func(ctx context.Context) { f.follow(ctx, rv) })
	return w, nil
}

func (w *markerWatch) event(ev watch.Event, at time.Time) bool {
	if nc, ok := ev.Object.(*v1alpha1.NodeCapacity); ok && ev.Type != watch.Bookmark {
		if v, ok := nc.Labels[w.label]; ok {
			w.mu.Lock()
			if _, seen := w.seen[v]; !seen {
				w.seen[v] = at
			}
			w.mu.Unlock()
		}
	}
	return true
}

func (w *markerWatch) await(ctx context.Context, value string, timeout time.Duration) (time.Time, error) {
	var at time.Time
	err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		w.mu.Lock()
		defer w.mu.Unlock()
		t, ok := w.seen[value]
		at = t
		return ok, nil
	})
	if err != nil {
		return time.Time{}, fmt.Errorf("change %s did not reach the watch: %w", value, err)
	}
	return at, nil
}

// faultRegistry is the primary faults' registry: a primary with a streaming
// standby, a replica on their multi-host DSN (read-write, as
// TestRegistryHungPrimary), a store writing the changes as discovery does,
// and a watch on the replica's own port.
type faultRegistry struct {
	primary *postgres.Instance
	standby *postgres.Standby
	dsn     string
	replica *framework.FleetReplica
	writer  *registrypostgres.Store
	watch   *markerWatch
	seq     int        // numbers the changes,
	node    store.Node // each a relabel of node
	stopped bool
}

func (r *faultRegistry) next() string {
	r.seq++
	return strconv.Itoa(r.seq)
}

// commit writes change v through w as discovery writes a batch (each
// attempt with its timeout, retried after 100 ms) and returns when the
// commit returned. It may run concurrently.
func (r *faultRegistry) commit(ctx context.Context, w *registrypostgres.Store, v string) (time.Time, error) {
	n := r.node
	n.Labels = maps.Clone(r.node.Labels)
	n.Labels[faultLabel] = v
	err := pollUntil(ctx, 100*time.Millisecond, freshTimeout, func(ctx context.Context) (bool, string, error) {
		actx, cancel := context.WithTimeout(ctx, applyAttemptTimeout)
		defer cancel()
		err := w.Apply(actx, store.Batch{ClusterID: clusterID, Nodes: []store.Node{n}})
		return err == nil, fmt.Sprint(err), nil
	})
	if err != nil {
		return time.Time{}, fmt.Errorf("commit change %s: %w", v, err)
	}
	return time.Now(), nil
}

// commitAndAwait commits the next change through w and waits for the watch.
func (r *faultRegistry) commitAndAwait(ctx context.Context, w *registrypostgres.Store) (committed, seen time.Time, err error) {
	v := r.next()
	if committed, err = r.commit(ctx, w, v); err != nil {
		return committed, seen, err
	}
	seen, err = r.watch.await(ctx, v, freshTimeout)
	return committed, seen, err
}

// beforeFault waits until the replica answers /readyz and the standby has
// replayed everything: with synchronous_commit=off that makes every commit
// so far durable on both, so a fault loses none.
func (r *faultRegistry) beforeFault(ctx context.Context) error {
	err := pollUntil(ctx, 100*time.Millisecond, freshTimeout, func(ctx context.Context) (bool, string, error) {
		_, err := r.replica.Get(ctx, "/readyz")
		return err == nil, fmt.Sprint(err), nil
	})
	if err != nil {
		return fmt.Errorf("%s not ready: %w", r.replica.Name(), err)
	}
	return r.standby.CatchUp(ctx)
}

// stop kills the primary first (a frozen one never stops gracefully, a
// promoted one's must not wake up as a second primary), then the rest.
func (r *faultRegistry) stop() error {
	var errs []error
	if r.primary != nil {
		errs = append(errs, r.primary.Kill())
	}
	if r.watch != nil {
		r.watch.g.close()
	}
	if r.replica != nil {
		errs = append(errs, r.replica.Stop())
	}
	if r.writer != nil {
		r.writer.Close()
	}
	if r.standby != nil {
		errs = append(errs, r.standby.Stop())
	}
	if r.primary != nil {
		errs = append(errs, r.primary.Stop())
	}
	return errors.Join(errs...)
}

// discoveryReplica runs discovery of member discoveryClusterID, with a
// watch on its own port.
type discoveryReplica struct {
	*framework.FleetReplica
	watch *markerWatch
}

// faultMember is the replica faults' set-up: two discovery replicas sharing
// the member through its Lease (discovery's defaults), on the framework's
// registry, and the member Node each change relabels.
type faultMember struct {
	e        *env
	prefix   string // names the replicas prefix-N
	replicas [2]*discoveryReplica
	started  int
	seq      int
}

func (m *faultMember) startReplica(ctx context.Context) (*discoveryReplica, error) {
	m.started++
	name := fmt.Sprintf("%s-%d", m.prefix, m.started)
	fr, err := m.e.cp.StartFleetReplica(ctx, name, discoveryArgs, replicaReadyTimeout)
	if err != nil {
		return nil, err
	}
	r := &discoveryReplica{FleetReplica: fr}
	if r.watch, err = m.e.openMarkerWatch(ctx, fr.URL(), faultLabel); err != nil {
		return r, errors.Join(err, fr.Stop())
	}
	return r, nil
}

// change sets the next value of faultLabel on the member's Node.
func (m *faultMember) change(ctx context.Context) (string, error) {
	m.seq++
	v := strconv.Itoa(m.seq)
	return v, m.e.relabel(ctx, "nodes", nodeName(0), faultLabel, v) // startFaultMember's Node
}

// changeSeenBy makes a change in the member and returns when r's watch had it.
func (m *faultMember) changeSeenBy(ctx context.Context, r *discoveryReplica) (time.Time, error) {
	v, err := m.change(ctx)
	if err != nil {
		return time.Time{}, err
	}
	return r.watch.await(ctx, v, freshTimeout)
}

// settle makes a change and waits until both replicas' watches have it.
func (m *faultMember) settle(ctx context.Context) error {
	v, err := m.change(ctx)
	if err != nil {
		return err
	}
	for _, r := range m.replicas {
		if _, err := r.watch.await(ctx, v, freshTimeout); err != nil {
			return fmt.Errorf("%s before the fault: %w", r.Name(), err)
		}
	}
	return nil
}

// holder returns the index of the replica holding the member's Lease,
// whose identity its log names.
func (m *faultMember) holder(ctx context.Context) (int, error) {
	leases := m.e.kube.CoordinationV1().Leases(metav1.NamespaceSystem)
	name := shard.MemberLeaseName("platform-apiserver-discovery", discoveryClusterID)
	holding := -1
	err := pollUntil(ctx, 100*time.Millisecond, freshTimeout, func(ctx context.Context) (bool, string, error) {
		l, err := leases.Get(ctx, name, metav1.GetOptions{})
		if err != nil || l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "" {
			return false, fmt.Sprintf("Lease %s unheld: %v", name, err), nil
		}
		id := *l.Spec.HolderIdentity
		for i, r := range m.replicas {
			log, err := os.ReadFile(r.LogPath())
			if err != nil || strings.Contains(string(log), `identity="`+id+`"`) {
				holding = i
				return err == nil, "", err
			}
		}
		return false, "holder " + id + " is neither replica", nil
	})
	if err != nil {
		return -1, fmt.Errorf("find the member's Lease holder: %w", err)
	}
	return holding, nil
}

// replace starts a new replica in the place of killed, one of m.replicas.
func (m *faultMember) replace(ctx context.Context, killed *discoveryReplica) error {
	i := slices.Index(m.replicas[:], killed)
	killed.watch.g.close()
	m.replicas[i] = nil
	r, err := m.startReplica(ctx)
	if err == nil {
		m.replicas[i] = r
	}
	return err
}

func (m *faultMember) stop() error {
	var errs []error
	for _, r := range m.replicas {
		if r == nil {
			continue
		}
		if r.watch != nil {
			r.watch.g.close()
		}
		errs = append(errs, r.Stop())
	}
	return errors.Join(errs...)
}
