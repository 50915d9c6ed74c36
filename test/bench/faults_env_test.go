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
	faultLabel          = "bench.platform.example.io/fault-change" // its value numbers the change
	freshTimeout        = 3 * time.Minute                          // one change to reach a watch
	applyAttemptTimeout = time.Minute                              // discovery's ApplyTimeout
	replicaReadyTimeout = 2 * time.Minute                          // a replica's start, migrations included
)

// markerWatch watches every NodeCapacity on one server's own port through a
// fault, noting when each value of its label first arrives. It resumes as
// reflectors do; ends says why each stream ended.
type markerWatch struct {
	g     *watchGroup
	label string
	mu    sync.Mutex
	seen  map[string]time.Time
	ends  []string
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

// mark counts the streams ended so far; endingsSince says why later ones did.
func (w *markerWatch) mark() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.ends)
}

func (w *markerWatch) endingsSince(after int) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.ends[after:])
}

func (w *markerWatch) close() { w.g.close() }

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

// startFaultRegistry starts it (the replica named name) and returns once a
// first change has reached the watch; on error it holds what started.
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
	var last error
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, freshTimeout, true, func(ctx context.Context) (bool, error) {
		_, last = r.replica.Get(ctx, "/readyz")
		return last == nil, nil
	})
	if err != nil {
		return fmt.Errorf("%s not ready: %w (last: %w)", r.replica.Name(), err, last)
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

var faultNodeName = nodeName(0)

// startFaultMember creates the member's Node (unless it exists) and starts
// the replicas; on error it holds what started.
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

// change sets the next value of faultLabel on the member's Node.
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

// replace starts a new replica in a killed one's place.
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
