package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/example/platform-apiserver/pkg/apis/platform/v1alpha1"
	"github.com/example/platform-apiserver/pkg/registry/store"
	"github.com/example/platform-apiserver/test/framework"
)

// removalGrace is the --member-removal-grace-period of TestDiscoveryMemberRemoval.
const removalGrace = 4 * time.Second

// TestDiscoveryMemberRemoval runs two replicas sharing the hosting cluster
// and three more ids of it, each replica reading its own copy of the members
// Secret, as two pods whose kubelets update their copies at different
// times.
//
// A member's kubeconfig is removed while its namespaces change, first from
// the copy of the replica that does not hold its Lease, later from its
// holder's: the registry removes it once, a grace after no copy lists it,
// and watchers of its ClusterCapacity and NodeCapacity see exactly one
// DELETED each. (A replica deciding on its own copy deletes the objects
// while the holder still mirrors; the holder's next write is fenced, it
// claims the member back, and deletes it again a little later.)
//
// Then the Secret goes missing (a kubelet shows it as an empty directory)
// for longer than the grace, and comes back: every member stays mirrored
// meanwhile, and a UsageReport over the earlier hours answers as before.
func TestDiscoveryMemberRemoval(t *testing.T) {
	t.Parallel()
	dirs := []string{t.TempDir(), t.TempDir()}
	e := newEnv(t, framework.Options{
		PlatformAPIServerBinary: os.Getenv("PLATFORM_APISERVER_BINARY"),
		ExtraPlatformArgs: []string{
			"--cluster-id=local",
			"--kubeconfig=kubeconfig",
			"--member-kubeconfig-dir=" + dirs[0],
			"--member-kubeconfig-dir-interval=300ms",
			"--member-removal-grace-period=" + removalGrace.String(),
			"--discovery-batch-delay=50ms",
			"--leader-elect-lease-duration=" + sharedLease.String(),
			"--leader-elect-renew-deadline=2s",
			"--leader-elect-retry-period=250ms",
		},
	})
	ctx := t.Context()
	members := []string{"member-1", "member-2", "member-3"}
	writeMembers := func(dir string) {
		for _, id := range members {
			copyFile(t, e.cp.AdminKubeconfig(), filepath.Join(dir, id))
		}
	}
	for _, dir := range dirs {
		writeMembers(dir)
	}
	if _, err := e.kube.CoreV1().Nodes().Create(ctx, testNode("n1"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	second, err := e.cp.StartFleetReplica(ctx, "replica-2", []string{"--member-kubeconfig-dir=" + dirs[1]}, 2*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = second.Stop() })
	replicas := []removalReplica{
		{dir: dirs[0], log: e.cp.PlatformAPIServerLogPath(), metrics: e.cp.PlatformMetrics},
		{dir: dirs[1], log: second.LogPath(), metrics: second.Metrics},
	}
	var holders map[string]string
	eventually(t, "four members shared two per replica, n1 mirrored under each", mirrorTimeout, func(ctx context.Context) (bool, string) {
		holders = e.memberLeaseHolders(ctx)
		out := e.jsonpath(ctx, "{.items[*].metadata.name}", "get", "nodecapacities")
		return len(holders) == 4 && fairShare(holders, 2) && strings.Count(out, ".n1") == 4, fmt.Sprint(holders, " ", out)
	})

	t.Run("kubeconfig removed", func(t *testing.T) { e.testMemberKubeconfigRemoved(t, replicas, holders) })
	t.Run("members Secret missing", func(t *testing.T) { e.testMembersSecretMissing(t, replicas, writeMembers) })
}

// removalReplica is one replica of TestDiscoveryMemberRemoval.
type removalReplica struct {
	dir     string
	log     string
	metrics func(context.Context) (string, error)
}

func (r removalReplica) metric(ctx context.Context, name string, match ...string) (float64, error) {
	body, err := r.metrics(ctx)
	if err != nil {
		return 0, err
	}
	return framework.MetricSum(body, name, match...)
}

func (r removalReplica) logged(line string) bool {
	b, _ := os.ReadFile(r.log)
	return strings.Contains(string(b), line)
}

// propagationLag is how much later the holder's copy of the Secret loses
// the member: longer than a fenced write, a new claim and a relist, so a
// holder that decided on its own copy would claim the member back.
const propagationLag = 4 * time.Second

func (e *env) testMemberKubeconfigRemoved(t *testing.T, replicas []removalReplica, holders map[string]string) {
	ctx := t.Context()
	const gone = "member-1"
	first, later := replicas[0], replicas[1]
	if holders[gone] == identityOf(t, first.log) {
		first, later = later, first
	}
	e.changeNamespaces(t, "removal")
	capacities := e.watchCapacities(t, "metadata.name="+gone)
	nodes := e.watchNodes(t, "status.cluster="+gone)

	if err := os.Remove(filepath.Join(first.dir, gone)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(propagationLag) // the holder's kubelet's copy is behind
	if err := os.Remove(filepath.Join(later.dir, gone)); err != nil {
		t.Fatal(err)
	}
	removedFromAll := time.Now()
	eventually(t, "the member's objects deleted", removalGrace+mirrorTimeout, func(context.Context) (bool, string) {
		c, n := capacities.count(watch.Deleted), nodes.count(watch.Deleted)
		return c > 0 && n > 0, fmt.Sprintf("ClusterCapacity %v, NodeCapacities %v", capacities.types(), nodes.types())
	})
	t.Logf("deleted %s after the last copy of the Secret dropped the member (grace %s)", time.Since(removedFromAll).Round(10*time.Millisecond), removalGrace)
	// Past the time at which a holder deciding on its own copy would have
	// deleted the member again.
	time.Sleep(time.Until(removedFromAll.Add(removalGrace + 2*time.Second)))
	for what, w := range map[string]*eventLog{"ClusterCapacity": capacities, "NodeCapacity": nodes} {
		if w.count(watch.Deleted) != 1 || w.count(watch.Added) != 0 {
			t.Errorf("watch of the removed member's %s: events %v, want exactly one DELETED and no ADDED", what, w.types())
		}
	}
	eventually(t, "both replicas stopped the member", mirrorTimeout, func(context.Context) (bool, string) {
		line := `"Member cluster removed from the registry; stopping its worker" cluster="` + gone + `"`
		return first.logged(line) && later.logged(line), "not logged by both"
	})
	var removals float64
	for _, r := range replicas {
		v, err := r.metric(ctx, "platform_discovery_member_removals_total")
		if err != nil {
			t.Fatal(err)
		}
		removals += v
	}
	if removals != 1 {
		t.Errorf("member removals counted %v times over both replicas, want 1", removals)
	}
}

func (e *env) testMembersSecretMissing(t *testing.T, replicas []removalReplica, restore func(dir string)) {
	const kept = "member-2"
	e.recordUsageHistory(t, kept)
	before := e.usageReports(t, kept)
	capacities := e.watchCapacities(t, "")

	for _, r := range replicas {
		entries, err := os.ReadDir(r.dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range entries {
			if err := os.Remove(filepath.Join(r.dir, f.Name())); err != nil {
				t.Fatal(err)
			}
		}
	}
	missing := time.Now()
	eventually(t, "both replicas say they cannot tell the members", mirrorTimeout, func(ctx context.Context) (bool, string) {
		var got []float64
		for _, r := range replicas {
			v, _ := r.metric(ctx, "platform_discovery_members_config_unknown")
			got = append(got, v)
		}
		return fmt.Sprint(got) == "[1 1]", fmt.Sprint(got)
	})
	t.Logf("members_config_unknown on both replicas %s after the Secret went missing", time.Since(missing).Round(10*time.Millisecond))
	time.Sleep(2 * removalGrace) // missing for longer than the grace
	for _, r := range replicas {
		restore(r.dir)
	}
	eventually(t, "both replicas read the members again", mirrorTimeout, func(ctx context.Context) (bool, string) {
		var got []float64
		for _, r := range replicas {
			v, _ := r.metric(ctx, "platform_discovery_members_config_unknown")
			got = append(got, v)
		}
		return fmt.Sprint(got) == "[0 0]", fmt.Sprint(got)
	})
	if n := capacities.count(watch.Deleted); n != 0 {
		t.Errorf("%d ClusterCapacities deleted while the Secret was missing, want none: %v", n, capacities.types())
	}
	e.mirroredEverywhere(t, "after-secret-missing", []string{"local", "member-1", "member-2", "member-3"})
	if after := e.usageReports(t, kept); after != before {
		t.Errorf("usage reports of %s after the Secret was missing and restored:\n%s\nwant as before:\n%s", kept, after, before)
	}
}

// changeNamespaces creates a namespace in the (one) member cluster four
// times a second until the test ends, so every member's holder writes.
func (e *env) changeNamespaces(t *testing.T, prefix string) {
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ctx.Err() == nil; i++ {
			_, _, _ = e.cp.Kubectl(ctx, "create", "namespace", fmt.Sprintf("%s-%d", prefix, i))
			select {
			case <-ctx.Done():
			case <-time.After(250 * time.Millisecond):
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
}

// recordUsageHistory records usage samples in the registry as the
// member's scraper would, under its owner's fence: two hours of its
// namespace kube-system, and of its node n1 since the node was created
// (the registry keeps no sample of a node older than the node).
func (e *env) recordUsageHistory(t *testing.T, cluster string) {
	t.Helper()
	ctx := t.Context()
	f := e.memberFence(t, cluster)
	policy := store.UsageReporting{Threshold: 0.05, Period: 5 * time.Minute}
	n1, err := e.kube.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	start, nodeStart := time.Now().UTC().Add(-2*time.Hour), n1.CreationTimestamp.Add(time.Second)
	var nodes []store.NodeMetricsSample
	for i := range 24 {
		cpu, mem := int64(1e8*(1+i%7)), int64(1<<20)*int64(100+i*13%50)
		nodes = append(nodes, store.NodeMetricsSample{ClusterID: cluster, Node: "n1", CPUNanoCores: cpu, MemoryBytes: mem,
			ObservedAt: nodeStart.Add(time.Duration(i) * 100 * time.Millisecond), Window: 30 * time.Second})
		ns := store.NamespaceMetricsSample{ClusterID: cluster, Namespace: "kube-system", CPUNanoCores: cpu / 2, MemoryBytes: mem / 2, Pods: 1,
			ObservedAt: start.Add(time.Duration(i) * 5 * time.Minute)}
		if _, err := e.store.RecordNamespaceMetrics(ctx, f, []store.NamespaceMetricsSample{ns}, policy); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.store.RecordNodeMetrics(ctx, f, nodes, policy); err != nil {
		t.Fatal(err)
	}
}

// memberFence reads the fence of the member's current owner.
func (e *env) memberFence(t *testing.T, cluster string) store.Fence {
	t.Helper()
	db, err := pgx.Connect(t.Context(), e.cp.DatabaseURL())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(context.Background())
	f := store.Fence{ClusterID: cluster}
	if err := db.QueryRow(t.Context(), `SELECT epoch, (SELECT failovers FROM registry_epoch LIMIT 1) FROM discovery_member WHERE cluster_id = $1`,
		cluster).Scan(&f.Epoch, &f.Failovers); err != nil {
		t.Fatal(err)
	}
	return f
}

// usageReports asks the member's usage over the last three hours, of its
// nodes and of its namespace kube-system, and returns the answers as JSON.
func (e *env) usageReports(t *testing.T, cluster string) string {
	t.Helper()
	var out []string
	for _, ns := range []string{"", "kube-system"} {
		r, err := e.platform.PlatformV1alpha1().UsageReports().Create(t.Context(), &v1alpha1.UsageReport{Spec: v1alpha1.UsageReportSpec{
			Cluster: cluster, Namespace: ns, Window: metav1.Duration{Duration: 3 * time.Hour}}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("UsageReport of %s (namespace %q): %v", cluster, ns, err)
		}
		if r.Status.Samples == 0 {
			t.Fatalf("UsageReport of %s (namespace %q): no samples", cluster, ns)
		}
		b, err := json.Marshal(r.Status)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, string(b))
	}
	return strings.Join(out, "\n")
}

// eventLog collects the events of a watch of platform objects.
type eventLog struct {
	mu     sync.Mutex
	events []watch.EventType
}

func (l *eventLog) types() []watch.EventType {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]watch.EventType(nil), l.events...)
}

func (l *eventLog) count(typ watch.EventType) int {
	n := 0
	for _, e := range l.types() {
		if e == typ {
			n++
		}
	}
	return n
}

// watchCapacities and watchNodes watch ClusterCapacities and NodeCapacities
// from now, with a field selector, and collect the events until the test ends.
func (e *env) watchCapacities(t *testing.T, fieldSelector string) *eventLog {
	return watchFromNow(t, e.platform.PlatformV1alpha1().ClusterCapacities(), fieldSelector)
}

func (e *env) watchNodes(t *testing.T, fieldSelector string) *eventLog {
	return watchFromNow(t, e.platform.PlatformV1alpha1().NodeCapacities(), fieldSelector)
}

// listWatcher is the part of a typed client watchFromNow uses.
type listWatcher[L interface{ GetResourceVersion() string }] interface {
	List(ctx context.Context, opts metav1.ListOptions) (L, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}

// watchFromNow lists for a resourceVersion and watches c from it.
func watchFromNow[L interface{ GetResourceVersion() string }](t *testing.T, c listWatcher[L], fieldSelector string) *eventLog {
	t.Helper()
	list, err := c.List(t.Context(), metav1.ListOptions{FieldSelector: fieldSelector})
	if err != nil {
		t.Fatal(err)
	}
	w, err := c.Watch(t.Context(), metav1.ListOptions{FieldSelector: fieldSelector, ResourceVersion: list.GetResourceVersion()})
	if err != nil {
		t.Fatal(err)
	}
	return collectEvents(t, w)
}

func collectEvents(t *testing.T, w watch.Interface) *eventLog {
	t.Cleanup(w.Stop)
	l := &eventLog{}
	go func() {
		for ev := range w.ResultChan() {
			l.mu.Lock()
			l.events = append(l.events, ev.Type)
			l.mu.Unlock()
		}
	}()
	return l
}
