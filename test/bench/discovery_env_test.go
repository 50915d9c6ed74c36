package bench

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/util/workqueue"

	"github.com/example/platform-apiserver/pkg/registry/store"
)

const (
	// discoveryClusterID is the member the discovery environment's server
	// mirrors: its own kube-apiserver, as the integration test does.
	discoveryClusterID = "local"
	// syncNamespaces and syncPods are created in kube-apiserver next to
	// nodeCount Nodes before discovery syncs them.
	syncNamespaces = 10000
	syncPods       = 50000
	// seedWorkers bounds concurrent creates against kube-apiserver.
	seedWorkers = 32
)

// podsPerSyncNode and podsPerSyncNamespace follow from the counts: pod j
// is bound to node j%nodeCount and lives in namespace j/podsPerSyncNamespace.
const (
	podsPerSyncNode      = syncPods / nodeCount
	podsPerSyncNamespace = syncPods / syncNamespaces
)

// discoveryArgs make the platform-apiserver mirror the framework's own
// kube-apiserver as member "local" (the framework runs it in its work
// directory, where the admin kubeconfig is). Everything else is the default
// a deployment gets: batches of up to 1,000 events or 100ms, leader election
// on with a 15s lease (released on a graceful stop), metrics every 30s (no
// metrics.k8s.io here, so the scraper only logs that it is absent).
var discoveryArgs = []string{
	"--cluster-id=" + discoveryClusterID,
	"--kubeconfig=kubeconfig",
}

// discoveryEnv is a control plane of its own whose platform-apiserver runs
// discovery against its kube-apiserver, and a connection to its registry's
// database for the counts and resourceVersions the benchmarks read.
type discoveryEnv struct {
	*env
	db *pgxpool.Pool
	// want is what the member holds once seeded, which a complete sync
	// mirrors row for row.
	want registryCounts
	// seq numbers the freshness benchmark's namespace changes.
	seq int
	// scrapes counts the metrics benchmark's batches; each is observed one
	// metrics interval after the previous one.
	scrapes int
}

// startDiscoveryEnv starts the discovery environment, stops its
// platform-apiserver (which has synced the near-empty cluster), seeds
// kube-apiserver with nodeCount Nodes, syncNamespaces Namespaces and syncPods
// Pods, and counts what the member holds. The registry still holds the
// near-empty first sync; the initial-sync benchmark deletes it before each
// start. On error the returned env, when non-nil, holds whatever started.
func startDiscoveryEnv(ctx context.Context) (*discoveryEnv, error) {
	ctx, cancel := context.WithTimeout(ctx, setupTimeout)
	defer cancel()
	e, err := startControlPlane(ctx, controlPlaneOptions{
		workDirPrefix:     "platform-bench-discovery-",
		extraPlatformArgs: discoveryArgs,
	})
	d := &discoveryEnv{env: e}
	if err != nil {
		return d, err
	}
	if d.db, err = pgxpool.New(ctx, e.cp.DatabaseURL()); err != nil {
		return d, fmt.Errorf("connect to the registry database: %w", err)
	}
	// Stopped gracefully, it releases its discovery lease, so the next start
	// takes it at once.
	if err := e.cp.StopPlatformAPIServer(); err != nil {
		return d, err
	}
	if err := d.seedMember(ctx); err != nil {
		return d, fmt.Errorf("seed kube-apiserver: %w", err)
	}
	if d.want, err = d.memberCounts(ctx); err != nil {
		return d, err
	}
	if d.want.nodes != nodeCount || d.want.pods != syncPods || d.want.namespaces < syncNamespaces {
		return d, fmt.Errorf("kube-apiserver holds %s, want %d nodes, %d pods and at least %d namespaces",
			d.want, nodeCount, syncPods, syncNamespaces)
	}
	return d, nil
}

// stop stops everything startDiscoveryEnv started; see env.stop.
func (d *discoveryEnv) stop(keepLogs bool) error {
	if d.db != nil {
		d.db.Close()
	}
	if d.env == nil {
		return nil
	}
	return d.env.stop(keepLogs)
}

// seedMember creates the Nodes (as the list benchmarks' kube-apiserver side
// has them), then the Namespaces, then the Pods, each with seedWorkers
// concurrent requests.
func (d *discoveryEnv) seedMember(ctx context.Context) error {
	now := time.Now().UTC().Truncate(time.Second)
	steps := []struct {
		what string
		n    int
		run  func(context.Context) error
	}{
		{"Nodes", nodeCount, func(ctx context.Context) error { return d.createKubeNodes(ctx, now) }},
		{"Namespaces", syncNamespaces, func(ctx context.Context) error {
			return d.parallelCreate(ctx, syncNamespaces, func(ctx context.Context, i int) error {
				_, err := d.kube.CoreV1().Namespaces().Create(ctx, syncNamespace(i), metav1.CreateOptions{})
				return err
			})
		}},
		{"Pods", syncPods, func(ctx context.Context) error {
			return d.parallelCreate(ctx, syncPods, func(ctx context.Context, j int) error {
				p := syncPod(j)
				_, err := d.kube.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{})
				return err
			})
		}},
	}
	for _, s := range steps {
		begin := time.Now()
		if err := s.run(ctx); err != nil {
			return fmt.Errorf("create %s: %w", s.what, err)
		}
		took := time.Since(begin)
		fmt.Fprintf(os.Stderr, "discovery: created %d %s in kube-apiserver in %s (%.0f/s)\n",
			s.n, s.what, took.Round(time.Millisecond), float64(s.n)/took.Seconds())
	}
	return nil
}

// parallelCreate runs create for 0..n-1 with seedWorkers at a time and
// returns the first error.
func (d *discoveryEnv) parallelCreate(ctx context.Context, n int, create func(context.Context, int) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	workqueue.ParallelizeUntil(ctx, seedWorkers, n, func(i int) {
		if err := create(ctx, i); err != nil {
			cancel(fmt.Errorf("object %d: %w", i, err))
		}
	})
	return context.Cause(ctx)
}

func syncNamespaceName(i int) string { return fmt.Sprintf("ns-%05d", i) }

// syncNamespace is namespace i: a team's, with the labels platforms put on
// namespaces.
func syncNamespace(i int) *corev1.Namespace {
	envs := []string{"prod", "staging", "dev"}
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name: syncNamespaceName(i),
		Labels: map[string]string{
			"platform.example.io/team":        fmt.Sprintf("team-%03d", i%200),
			"platform.example.io/environment": envs[i%len(envs)],
			"platform.example.io/cost-center": fmt.Sprintf("cc-%04d", i%50),
		},
		Annotations: map[string]string{"platform.example.io/owner": fmt.Sprintf("team-%03d@example.io", i%200)},
	}}
}

// syncPod is pod j, bound to node j%nodeCount in namespace
// j/podsPerSyncNamespace, shaped like a Deployment's pod: owner reference,
// template hash, an app container and a sidecar, both with requests and
// limits, probes and ports. It is created with spec.nodeName, so it counts
// as scheduled; with no kubelet it stays Pending, which is not terminal.
func syncPod(j int) *corev1.Pod {
	q := resource.MustParse
	app := fmt.Sprintf("app-%d", j/podsPerSyncNamespace%40)
	hash := fmt.Sprintf("%010x", j/podsPerSyncNamespace)
	cpu := []string{"100m", "250m", "500m", "50m"}[j%4]
	mem := []string{"128Mi", "256Mi", "512Mi", "1Gi"}[j%4]
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: syncNamespaceName(j / podsPerSyncNamespace),
			Name:      fmt.Sprintf("%s-%s-%05d", app, hash[:6], j),
			Labels:    map[string]string{"app.kubernetes.io/name": app, "pod-template-hash": hash},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "apps/v1", Kind: "ReplicaSet", Name: app + "-" + hash[:6],
				UID:        types.UID(fmt.Sprintf("6f1c2a4e-1111-4000-8000-%012d", j/podsPerSyncNamespace)),
				Controller: new(true), BlockOwnerDeletion: new(true),
			}},
		},
		Spec: corev1.PodSpec{
			NodeName: nodeName(j % nodeCount),
			Containers: []corev1.Container{
				{
					Name:  "app",
					Image: "registry.example.io/" + app + ":1.4.2",
					Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
					Env:   []corev1.EnvVar{{Name: "LOG_LEVEL", Value: "info"}, {Name: "PORT", Value: "8080"}},
					Resources: corev1.ResourceRequirements{
						Requests: corev1.ResourceList{corev1.ResourceCPU: q(cpu), corev1.ResourceMemory: q(mem)},
						Limits:   corev1.ResourceList{corev1.ResourceMemory: q(mem)},
					},
					ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{
						HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromString("http")},
					}},
				},
				{
					Name:  "proxy",
					Image: "registry.example.io/proxy:2.0.1",
					Resources: corev1.ResourceRequirements{
						Requests: corev1.ResourceList{corev1.ResourceCPU: q("10m"), corev1.ResourceMemory: q("32Mi")},
						Limits:   corev1.ResourceList{corev1.ResourceMemory: q("64Mi")},
					},
				},
			},
		},
	}
}

// registryCounts is how many namespaces, nodes and pods a side holds.
type registryCounts struct{ namespaces, nodes, pods int64 }

func (c registryCounts) String() string {
	return fmt.Sprintf("%d namespaces, %d nodes, %d pods", c.namespaces, c.nodes, c.pods)
}

func (c registryCounts) total() int64 { return c.namespaces + c.nodes + c.pods }

// memberCounts counts kube-apiserver's Namespaces, Nodes and Pods. Pods
// that are terminal would not be mirrored; none of the seeded ones are.
func (d *discoveryEnv) memberCounts(ctx context.Context) (registryCounts, error) {
	var c registryCounts
	var err error
	if c.namespaces, err = countPages(ctx, func(ctx context.Context, o metav1.ListOptions) (metav1.ListInterface, error) {
		return d.kube.CoreV1().Namespaces().List(ctx, o)
	}); err != nil {
		return c, fmt.Errorf("count Namespaces: %w", err)
	}
	if c.nodes, err = countPages(ctx, func(ctx context.Context, o metav1.ListOptions) (metav1.ListInterface, error) {
		return d.kube.CoreV1().Nodes().List(ctx, o)
	}); err != nil {
		return c, fmt.Errorf("count Nodes: %w", err)
	}
	if c.pods, err = countPages(ctx, func(ctx context.Context, o metav1.ListOptions) (metav1.ListInterface, error) {
		return d.kube.CoreV1().Pods("").List(ctx, o)
	}); err != nil {
		return c, fmt.Errorf("count Pods: %w", err)
	}
	return c, nil
}

// countPages counts a list's items by paging through it with metadata
// only kept: the length of each page.
func countPages(ctx context.Context, list func(context.Context, metav1.ListOptions) (metav1.ListInterface, error)) (int64, error) {
	var n int64
	opts := metav1.ListOptions{Limit: 1000}
	for {
		page, err := list(ctx, opts)
		if err != nil {
			return 0, err
		}
		n += int64(itemCount(page))
		if opts.Continue = page.GetContinue(); opts.Continue == "" {
			return n, nil
		}
	}
}

func itemCount(l metav1.ListInterface) int {
	switch l := l.(type) {
	case *corev1.NamespaceList:
		return len(l.Items)
	case *corev1.NodeList:
		return len(l.Items)
	case *corev1.PodList:
		return len(l.Items)
	}
	return 0
}

// registryCounts counts the member's rows in the registry.
func (d *discoveryEnv) registryCounts(ctx context.Context) (registryCounts, error) {
	var c registryCounts
	err := d.db.QueryRow(ctx, `
		SELECT (SELECT count(*) FROM cluster_namespace WHERE cluster_id = $1),
		       (SELECT count(*) FROM cluster_node WHERE cluster_id = $1),
		       (SELECT count(*) FROM cluster_pod WHERE cluster_id = $1)`,
		discoveryClusterID).Scan(&c.namespaces, &c.nodes, &c.pods)
	if err != nil {
		return c, fmt.Errorf("count registry rows: %w", err)
	}
	return c, nil
}

// registrySnapshot is what tells whether a restart wrote anything: the
// registry's resourceVersion (every changed or deleted view row takes one)
// and a transaction id taken just before, to find rows of any table —
// pods and quotas too, which carry no resourceVersion — written after it.
type registrySnapshot struct {
	rv  int64
	xid string
}

func (d *discoveryEnv) snapshot(ctx context.Context) (registrySnapshot, error) {
	var s registrySnapshot
	// txid_current assigns this (otherwise read-only) statement an xid, so
	// every transaction that commits later has a larger one.
	err := d.db.QueryRow(ctx, `SELECT (SELECT resource_version FROM registry_state), txid_current()::text`).Scan(&s.rv, &s.xid)
	if err != nil {
		return s, fmt.Errorf("read registry state: %w", err)
	}
	return s, nil
}

// rowsWrittenSince counts the member's rows, over every mirrored table,
// inserted or updated by a transaction that began after s (a row's xmin is
// the transaction that wrote it; age() compares transaction ids modulo
// wraparound), and how far the registry's resourceVersion moved.
func (d *discoveryEnv) rowsWrittenSince(ctx context.Context, s registrySnapshot) (rows, rvDelta int64, err error) {
	var rv int64
	err = d.db.QueryRow(ctx, `
		SELECT (SELECT resource_version FROM registry_state),
		       (SELECT count(*) FROM cluster_namespace WHERE cluster_id = $1 AND age(xmin) < age($2::xid))
		     + (SELECT count(*) FROM cluster_node WHERE cluster_id = $1 AND age(xmin) < age($2::xid))
		     + (SELECT count(*) FROM cluster_pod WHERE cluster_id = $1 AND age(xmin) < age($2::xid))
		     + (SELECT count(*) FROM cluster_resource_quota WHERE cluster_id = $1 AND age(xmin) < age($2::xid))`,
		discoveryClusterID, s.xid).Scan(&rv, &rows)
	if err != nil {
		return 0, 0, fmt.Errorf("count rows written: %w", err)
	}
	return rows, rv - s.rv, nil
}

// removeMember removes the member from the registry at once (its rows and
// cursors; the server is stopped), as the registry does once no
// configuration has listed it for the grace period; the server's next
// start lists it anew and syncs it from scratch.
func (d *discoveryEnv) removeMember(ctx context.Context) error {
	res, err := d.registry.ReconcileMembers(ctx, store.MembersView{Unconfigured: []string{discoveryClusterID}})
	if err != nil {
		return fmt.Errorf("remove member %s: %w", discoveryClusterID, err)
	}
	if len(res.Removed) != 1 {
		return fmt.Errorf("remove member %s: the registry answered %+v", discoveryClusterID, res)
	}
	return nil
}
