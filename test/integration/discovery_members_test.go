package integration

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/example/platform-apiserver/pkg/registry/store"
	"github.com/example/platform-apiserver/test/framework"
)

// TestDiscoveryMembers mirrors a second control plane added through
// --member-kubeconfig-dir, keyed by its file name, drops its rows when the
// file stays removed for the grace period (and not before), and survives a
// member that refuses access (403). TestDiscoveryMemberRemoval has the
// removal with two replicas, and a members Secret gone missing.
func TestDiscoveryMembers(t *testing.T) {
	t.Parallel()
	const memberGrace = 6 * time.Second
	binary := os.Getenv("PLATFORM_APISERVER_BINARY")
	second := framework.ForTest(t, framework.Options{PlatformAPIServerBinary: binary})
	dir := t.TempDir()
	e := newMembersEnv(t, dir, "--member-removal-grace-period="+memberGrace.String())
	ctx := t.Context()
	mirroredIn := func(ns, cluster string) func(context.Context) (bool, string) {
		return func(ctx context.Context) (bool, string) {
			out, _, err := e.cp.Kubectl(ctx, "get", "clusternamespaces", "-n", ns, "-o", "name")
			return err == nil && strings.Contains(out, "/"+cluster), out
		}
	}

	copyFile(t, second.AdminKubeconfig(), filepath.Join(dir, "second"))
	if _, _, err := second.Kubectl(ctx, "create", "namespace", "only-in-second"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the second cluster's namespace", mirrorTimeout, mirroredIn("only-in-second", "second"))
	eventually(t, "the hosting cluster's kube-system", mirrorTimeout, mirroredIn("kube-system", "local"))
	eventually(t, "kube-system of both clusters", mirrorTimeout, func(ctx context.Context) (bool, string) {
		out := e.jsonpath(ctx, "{.items[*].status.cluster}", "get", "clusternamespaces", "-n", "kube-system")
		return strings.Contains(out, "local") && strings.Contains(out, "second"), out
	})

	testRefusedKubeconfig(t, e, dir)

	// A member whose identity has no RBAC: clear errors, counted, no crash.
	_, denied, err := e.cp.UserConfig("no-rbac")
	if err != nil {
		t.Fatal(err)
	}
	copyFile(t, denied, filepath.Join(dir, "denied"))
	eventually(t, "forbidden errors counted for the denied member", mirrorTimeout, func(ctx context.Context) (bool, string) {
		v, err := e.platformMetric(ctx, "platform_discovery_errors_total", `cluster="denied"`, `reason="forbidden"`)
		return err == nil && v > 0, err2s(err)
	})
	if _, _, err := e.cp.Kubectl(ctx, "get", "--raw", "/apis/platform.example.io/v1alpha1/nodecapacities"); err != nil {
		t.Fatalf("the server stopped serving with a denied member: %v", err)
	}
	eventually(t, "members by state: local and second synced, denied unreachable", mirrorTimeout, func(ctx context.Context) (bool, string) {
		synced, err1 := e.platformMetric(ctx, "platform_discovery_members", `state="synced"`)
		unreachable, err2 := e.platformMetric(ctx, "platform_discovery_members", `state="unreachable"`)
		return synced == 2 && unreachable == 1, fmt.Sprintf("synced %v (%v), unreachable %v (%v)", synced, err1, unreachable, err2)
	})
	// The registry shows the same on each member's ClusterCapacity, the
	// denied one included although it has no rows.
	eventually(t, "mirroring states on the ClusterCapacities", mirrorTimeout, func(ctx context.Context) (bool, string) {
		out := e.jsonpath(ctx, `{range .items[*]}{.metadata.name}={.status.mirroring.state} {end}`, "get", "clustercapacities")
		return strings.Contains(out, "local=Synced") && strings.Contains(out, "second=Synced") && strings.Contains(out, "denied=Unreachable"), out
	})
	// And when each mirrored member last changed; the denied one never did.
	eventually(t, "last changes on the ClusterCapacities", mirrorTimeout, func(ctx context.Context) (bool, string) {
		out := e.jsonpath(ctx, `{range .items[*]}{.metadata.name}={.status.mirroring.lastChangeTime} {end}`, "get", "clustercapacities")
		return strings.Contains(out, "local=20") && strings.Contains(out, "second=20") && strings.Contains(out, "denied= "), out
	})
	if v, err := e.platformMetric(ctx, "platform_registry_objects_changed_total", `kind="ClusterNamespace"`); err != nil || v == 0 {
		t.Errorf("ClusterNamespace objects changed = %v, %v; want the mirrored namespaces counted", v, err)
	}
	if v, err := e.platformMetric(ctx, "platform_registry_pool_connections", `state="max"`); err != nil || v == 0 {
		t.Errorf("pool max connections = %v, %v; want the pool's limit", v, err)
	}

	// Removing the members' files (the refused one stays, so the directory
	// still names a member) removes nothing within the grace period; then
	// the members' rows go.
	for _, f := range []string{"second", "denied"} {
		if err := os.Remove(filepath.Join(dir, f)); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(memberGrace / 3) // several directory scans, well within the grace period
	if out := e.jsonpath(ctx, "{.items[*].status.cluster}", "get", "clusternamespaces", "-A"); !strings.Contains(out, "second") {
		t.Fatalf("the second cluster's rows were deleted within the grace period: %s", out)
	}
	eventually(t, "the second cluster's rows deleted", mirrorTimeout, func(ctx context.Context) (bool, string) {
		out := e.jsonpath(ctx, "{.items[*].status.cluster}", "get", "clusternamespaces", "-A")
		return !strings.Contains(out, "second") && strings.Contains(out, "local"), out
	})

	// A member removed while no server ran (its rows are there, its file is
	// not): the next start deletes its rows.
	if err := e.store.Apply(ctx, store.Batch{ClusterID: "gone", Namespaces: []store.Namespace{{Name: "old", UID: "old", Phase: "Active"}}}); err != nil {
		t.Fatal(err)
	}
	if err := e.cp.RestartPlatformAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the unconfigured cluster's rows deleted at start", mirrorTimeout, func(ctx context.Context) (bool, string) {
		out := e.jsonpath(ctx, "{.items[*].status.cluster}", "get", "clusternamespaces", "-A")
		return !strings.Contains(out, "gone") && strings.Contains(out, "local"), out
	})
}

// testRefusedKubeconfig: a members Secret key whose kubeconfig reads the
// server's own token from a file (tokenFile) and names a server the test
// listens on is refused, with a log line naming the key and the field and
// the refusal metric; it is not mirrored, and the listener never hears
// from the server, so the token never leaves.
func testRefusedKubeconfig(t *testing.T, e *env, dir string) {
	ctx := t.Context()
	var mu sync.Mutex
	var received []string
	listener := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		received = append(received, r.Method+" "+r.URL.Path+" Authorization="+r.Header.Get("Authorization"))
		mu.Unlock()
		http.Error(w, "nothing here", http.StatusNotFound)
	}))
	defer listener.Close()
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("secret-token-of-the-server"), 0o600); err != nil {
		t.Fatal(err)
	}
	kubeconfig := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: %q}}]
users: [{name: u, user: {tokenFile: %q}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`, listener.URL, tokenFile)
	refusedBefore, _ := e.platformMetric(ctx, "platform_discovery_member_kubeconfigs_refused_total", `reason="token_file"`)
	leaky := filepath.Join(t.TempDir(), "leaky")
	if err := os.WriteFile(leaky, []byte(kubeconfig), 0o600); err != nil {
		t.Fatal(err)
	}
	copyFile(t, leaky, filepath.Join(dir, "leaky"))
	eventually(t, "the refusal counted", mirrorTimeout, func(ctx context.Context) (bool, string) {
		v, err := e.platformMetric(ctx, "platform_discovery_member_kubeconfigs_refused_total", `reason="token_file"`)
		return err == nil && v == refusedBefore+1, fmt.Sprintf("%v (before %v), %v", v, refusedBefore, err)
	})
	logs, err := os.ReadFile(e.cp.PlatformAPIServerLogPath())
	if err != nil {
		t.Fatal(err)
	}
	line := grepLines(string(logs), "Refusing member kubeconfig")
	for _, want := range []string{`cluster="leaky"`, `users[\"u\"].tokenFile`, "--member-kubeconfig-allow-files-and-plugins"} {
		if !strings.Contains(line, want) {
			t.Errorf("the refusal log line lacks %s:\n%s", want, line)
		}
	}
	// Not started: the running members are still local and second.
	eventually(t, "the refused member not running", mirrorTimeout, func(ctx context.Context) (bool, string) {
		v, _ := e.platformMetric(ctx, "platform_discovery_member_kubeconfigs_refused_total", `reason="token_file"`)
		synced, _ := e.platformMetric(ctx, "platform_discovery_members", `state="synced"`)
		return v == refusedBefore+1 && synced == 2, fmt.Sprintf("refused %v, synced members %v", v, synced)
	})
	if out := e.jsonpath(ctx, "{.items[*].metadata.name}", "get", "clustercapacities"); strings.Contains(out, "leaky") {
		t.Errorf("the refused member is mirrored: %s", out)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(received) > 0 {
		t.Errorf("the refused member's server was contacted: %v", received)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	data, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	// Write elsewhere then rename, so the directory poll never reads half a
	// file nor sees a temporary name.
	tmp := filepath.Join(t.TempDir(), filepath.Base(to))
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, to); err != nil {
		t.Fatal(err)
	}
}

func err2s(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// TestDiscoveryMemberRebuilt: a member id whose cluster is replaced by
// another one (etcd replaced, cluster rebuilt) that has already issued
// resourceVersions beyond the persisted cursors. Resuming would silently miss
// everything before them; the worker notices the new kube-system uid, drops
// the cursors and relists, so the rows converge to the new cluster.
func TestDiscoveryMemberRebuilt(t *testing.T) {
	t.Parallel()
	binary := os.Getenv("PLATFORM_APISERVER_BINARY")
	before := framework.ForTest(t, framework.Options{PlatformAPIServerBinary: binary})
	dir := t.TempDir()
	e := newMembersEnv(t, dir)
	ctx := t.Context()
	clusters := func(ns string) func(ctx context.Context) string {
		return func(ctx context.Context) string {
			return e.jsonpath(ctx, "{.items[*].status.cluster}", "get", "clusternamespaces", "-n", ns)
		}
	}
	if _, _, err := before.Kubectl(ctx, "create", "namespace", "only-before"); err != nil {
		t.Fatal(err)
	}
	copyFile(t, before.AdminKubeconfig(), filepath.Join(dir, "rebuilt"))
	eventually(t, "the member mirrored", mirrorTimeout, func(ctx context.Context) (bool, string) {
		out := clusters("only-before")(ctx)
		return strings.Contains(out, "rebuilt"), out
	})

	after := framework.ForTest(t, framework.Options{PlatformAPIServerBinary: binary})
	if _, _, err := after.Kubectl(ctx, "create", "namespace", "only-after"); err != nil {
		t.Fatal(err)
	}
	// Move the new cluster's resourceVersion past the old cursors, so a
	// watch from them would be accepted there.
	client := kubernetes.NewForConfigOrDie(after.AdminConfig())
	for i := range 400 {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("filler-%d", i)}}
		if _, err := client.CoreV1().ConfigMaps("default").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	copyFile(t, after.AdminKubeconfig(), filepath.Join(dir, "rebuilt"))
	eventually(t, "the rows converged to the new cluster", mirrorTimeout, func(ctx context.Context) (bool, string) {
		gone, added := clusters("only-before")(ctx), clusters("only-after")(ctx)
		return !strings.Contains(gone, "rebuilt") && strings.Contains(added, "rebuilt"),
			fmt.Sprintf("only-before mirrored for %q, only-after for %q", gone, added)
	})
	if v, err := e.platformMetric(ctx, "platform_discovery_member_identity_changes_total", `cluster="rebuilt"`); err != nil || v < 1 {
		t.Errorf("identity changes metric = %v, %v; want at least 1", v, err)
	}
}

// newMembersEnv starts a stack whose discovery mirrors the hosting cluster as
// "local" and the members whose kubeconfigs are in dir, read every 300ms.
func newMembersEnv(t *testing.T, dir string, extraArgs ...string) *env {
	t.Helper()
	return newEnv(t, framework.Options{
		PlatformAPIServerBinary: os.Getenv("PLATFORM_APISERVER_BINARY"),
		ExtraPlatformArgs: append([]string{
			"--cluster-id=local",
			"--kubeconfig=kubeconfig",
			"--member-kubeconfig-dir=" + dir,
			"--member-kubeconfig-dir-interval=300ms",
			"--discovery-batch-delay=50ms",
		}, extraArgs...),
	})
}
