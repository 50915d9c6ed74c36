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
	// faultLabel marks each change the fault benchmarks make; its value
	// numbers the change.
	faultLabel = "bench.platform.example.io/fault-change"
	// freshTimeout bounds the wait for one change to reach a watch.
	freshTimeout = 3 * time.Minute
	// applyAttemptTimeout is discovery's ApplyTimeout: how long one
	// attempt to commit a batch may take before it is retried.
	applyAttemptTimeout = time.Minute
	// replicaReadyTimeout bounds a replica's start, migrations included.
	replicaReadyTimeout = 2 * time.Minute
)

// markerWatch is one watch of every NodeCapacity on one server's own port,
// opened before a fault and kept open through it, that notes when each
// value of its label first arrives. It resumes as reflectors do; ends says
// why each stream ended or could not be opened.
type markerWatch struct {
	g     *watchGroup
	label string
	mu    sync.Mutex
	seen  map[string]time.Time
	ends  []string
}

// openMarkerWatch lists NodeCapacities on the server at serverURL for a
// resourceVersion and watches from it for label, on a connection of its own.
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
	f := follower{open: c.PlatformV1alpha1().NodeCapacities().Watch, event: w.event, ended: w.ended}
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

func (w *markerWatch) ended(err error) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.ends = append(w.ends, err.Error())
	return true
}

// await returns when change value first arrived, waiting up to timeout.
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

// mark is how many streams have ended so far, for endingsSince.
func (w *markerWatch) mark() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.ends)
}

// endingsSince says why each stream that ended after mark did.
func (w *markerWatch) endingsSince(after int) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.ends[after:])
}

func (w *markerWatch) close() { w.g.close() }

// faultRegistry is a registry of its own for the primary faults: a
// PostgreSQL primary with one streaming standby, a platform-apiserver
// replica on their multi-host DSN with target_session_attrs=read-write (as
// TestRegistryHungPrimary), a store on the same DSN that writes the changes
// as discovery does, and a watch open on the replica's own port.
type faultRegistry struct {
	primary *postgres.Instance
	standby *postgres.Standby
	dsn     string
	replica *framework.FleetReplica
	writer  *registrypostgres.Store
	watch   *markerWatch
	// seq numbers the changes; each relabels node of member clusterID.
	seq  int
	node store.Node
	// stopped is set by the first stop.
	stopped bool
}

// startFaultRegistry starts the servers and the replica (named name), and
// returns once a first change has reached the watch. On error the returned
// registry, when non-nil, holds whatever started, for stop.
func (e *env) startFaultRegistry(ctx context.Context, name string) (*faultRegistry, error) {
	r := &faultRegistry{node: storeNode(0, time.Now().UTC().Truncate(time.Second))}
	var err error
	if r.primary, err = postgres.Start(ctx, postgres.Options{}); err != nil {
		return nil, fmt.Errorf("start PostgreSQL: %w", err)
	}
	if r.standby, err = r.primary.StartStandby(ctx, postgres.StandbyOptions{}); err != nil {
		return r, err
	}
	r.dsn = postgres.MultiHostDSN("", "read-write", r.primary, r.standby.Instance)
	if r.replica, err = e.cp.StartFleetReplica(ctx, name, []string{"--postgres-dsn=" + r.dsn}, replicaReadyTimeout); err != nil {
		return r, err
	}
	if r.writer, err = registrypostgres.Open(ctx, r.dsn, registrypostgres.Options{}); err != nil {
		return r, fmt.Errorf("open the writer's store: %w", err)
	}
	if r.watch, err = e.openMarkerWatch(ctx, r.replica.URL(), faultLabel); err != nil {
		return r, err
	}
	v := r.next()
	if _, err := r.commit(ctx, r.writer, v); err != nil {
		return r, err
	}
	if _, err := r.watch.await(ctx, v, freshTimeout); err != nil {
		return r, fmt.Errorf("before the fault: %w", err)
	}
	return r, nil
}

// next numbers the next change; commit writes it.
func (r *faultRegistry) next() string {
	r.seq++
	return strconv.Itoa(r.seq)
}

// commit writes change v (node relabelled) through w as discovery writes a
// batch: each attempt has discovery's timeout and a failed one is made
// again 100 ms later, up to freshTimeout. It returns when the commit
// returned. It reads only r.node, so changes may be committed concurrently.
func (r *faultRegistry) commit(ctx context.Context, w *registrypostgres.Store, v string) (time.Time, error) {
	n := r.node
	n.Labels = maps.Clone(r.node.Labels)
	n.Labels[faultLabel] = v
	var last error
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, freshTimeout, true, func(ctx context.Context) (bool, error) {
		actx, cancel := context.WithTimeout(ctx, applyAttemptTimeout)
		defer cancel()
		last = w.Apply(actx, store.Batch{ClusterID: clusterID, Nodes: []store.Node{n}})
		return last == nil, nil
	})
	if err != nil {
		return time.Time{}, fmt.Errorf("commit change %s: %w (last attempt: %w)", v, err, last)
	}
	return time.Now(), nil
}

// commitAndAwait commits the next change through w and waits until it is
// on the watch; it returns when the commit returned and when the watch had it.
func (r *faultRegistry) commitAndAwait(ctx context.Context, w *registrypostgres.Store) (committed, seen time.Time, err error) {
	v := r.next()
	if committed, err = r.commit(ctx, w, v); err != nil {
		return committed, seen, err
	}
	seen, err = r.watch.await(ctx, v, freshTimeout)
	return committed, seen, err
}

// beforeFault waits until the replica is ready and the standby has
// replayed everything the primary wrote. The test servers run with
// synchronous_commit=off, so a commit can return before its WAL is written;
// waiting for the standby makes every commit made so far durable on both,
// as synchronous_commit=on would, so a fault loses none.
func (r *faultRegistry) beforeFault(ctx context.Context) error {
	if err := waitReady(ctx, r.replica); err != nil {
		return err
	}
	return r.standby.CatchUp(ctx)
}

// waitReady waits until the replica answers /readyz, so each run starts
// healthy.
func waitReady(ctx context.Context, r *framework.FleetReplica) error {
	var last error
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, freshTimeout, true, func(ctx context.Context) (bool, error) {
		_, last = r.Get(ctx, "/readyz")
		return last == nil, nil
	})
	if err != nil {
		return fmt.Errorf("%s not ready: %w (last: %w)", r.Name(), err, last)
	}
	return nil
}

// stop kills the primary first (it may be frozen, and a frozen server
// never finishes a graceful stop; after a promotion it must not wake up as
// a second primary), then stops the rest.
func (r *faultRegistry) stop() error {
	var errs []error
	if r.primary != nil {
		errs = append(errs, r.primary.Kill())
	}
	if r.watch != nil {
		r.watch.close()
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

// discoveryReplica is a platform-apiserver running discovery of the
// framework's kube-apiserver as member discoveryClusterID, and a watch
// open on its own port.
type discoveryReplica struct {
	*framework.FleetReplica
	watch *markerWatch
}

// faultMember is the replica faults' set-up: two discovery replicas sharing
// the member through its Lease (discovery's defaults: 15 s lease, 10 s
// renew deadline, 2 s retry period), on the framework's registry, and the
// member Node whose label each change sets.
type faultMember struct {
	e *env
	// prefix names the replicas, each start a new log file.
	prefix   string
	replicas [2]*discoveryReplica
	started  int // replicas started so far, to name the next one
	seq      int
}

// faultNodeName is the member Node the replica faults relabel.
var faultNodeName = nodeName(0)

// startFaultMember creates the member's Node (unless an earlier
// sub-benchmark did) and starts the replicas, named prefix-N. On error the
// returned value holds whatever started, for stop.
func (e *env) startFaultMember(ctx context.Context, prefix string) (*faultMember, error) {
	m := &faultMember{e: e, prefix: prefix}
	now := time.Now().UTC().Truncate(time.Second)
	if _, err := e.kube.CoreV1().Nodes().Create(ctx, kubeNode(0, storeNode(0, now), now), metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return m, fmt.Errorf("create the member's Node: %w", err)
	}
	for i := range m.replicas {
		r, err := m.startReplica(ctx)
		if err != nil {
			return m, err
		}
		m.replicas[i] = r
	}
	return m, nil
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

// change sets the next value of faultLabel on the member's Node and
// returns it.
func (m *faultMember) change(ctx context.Context) (string, error) {
	m.seq++
	v := strconv.Itoa(m.seq)
	return v, m.e.relabel(ctx, "nodes", faultNodeName, faultLabel, v)
}

// changeSeenBy makes a change in the member and returns when r's watch had it.
func (m *faultMember) changeSeenBy(ctx context.Context, r *discoveryReplica) (time.Time, error) {
	v, err := m.change(ctx)
	if err != nil {
		return time.Time{}, err
	}
	return r.watch.await(ctx, v, freshTimeout)
}

// settle makes a change and waits until both replicas' watches have it:
// the member is mirrored and both followers read the registry.
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

// holder returns the index of the replica holding the member's Lease. A
// replica's Lease identity (host name and a random suffix) is in its log.
func (m *faultMember) holder(ctx context.Context) (int, error) {
	leases := m.e.kube.CoordinationV1().Leases(metav1.NamespaceSystem)
	name := shard.MemberLeaseName("platform-apiserver-discovery", discoveryClusterID)
	holding := -1
	var last string
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, freshTimeout, true, func(ctx context.Context) (bool, error) {
		l, err := leases.Get(ctx, name, metav1.GetOptions{})
		if err != nil || l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "" {
			last = fmt.Sprintf("Lease %s unheld: %v", name, err)
			return false, nil
		}
		id := *l.Spec.HolderIdentity
		last = "holder " + id + " is neither replica"
		for i, r := range m.replicas {
			log, err := os.ReadFile(r.LogPath())
			if err != nil {
				return false, err
			}
			if strings.Contains(string(log), `identity="`+id+`"`) {
				holding = i
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return -1, fmt.Errorf("find the member's Lease holder: %w (%s)", err, last)
	}
	return holding, nil
}

// replace stops the watch of a killed replica and starts a new replica in
// its place.
func (m *faultMember) replace(ctx context.Context, killed *discoveryReplica) error {
	for i, r := range m.replicas {
		if r != killed {
			continue
		}
		r.watch.close()
		m.replicas[i] = nil
		n, err := m.startReplica(ctx)
		if err != nil {
			return err
		}
		m.replicas[i] = n
		return nil
	}
	return fmt.Errorf("%s is not one of the replicas", killed.Name())
}

func (m *faultMember) stop() error {
	var errs []error
	for _, r := range m.replicas {
		if r == nil {
			continue
		}
		if r.watch != nil {
			r.watch.close()
		}
		errs = append(errs, r.Stop())
	}
	return errors.Join(errs...)
}
