package integration

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	"github.com/example/platform-apiserver/pkg/apis/platform/v1alpha1"
	"github.com/example/platform-apiserver/pkg/generated/clientset/versioned"
	"github.com/example/platform-apiserver/test/framework"
)

// olderKubectl is the other kubectl release tenants run (1.32 on this
// project's machines); the built one is 1.37.
const olderKubectl = "/usr/bin/kubectl"

// testUsageReportAccess installs the shipped roles and asks usage reports as
// the users the docs name (docs/security.md, "Who may read what"), with both
// kubectl releases and plain `kubectl create -f`: a tenant with view in
// team-a by a RoleBinding reads team-a's history in every member and gets
// 403 for everything else; a cluster-wide view reads every namespace's and
// no node's or member's; the fleet viewer reads the fleet. nsSamples is how
// many samples prod-2's team-a has.
func (e *env) testUsageReportAccess(t *testing.T, nsSamples int) {
	ctx := t.Context()
	e.installViewerRoles(t)
	for _, ns := range []string{"team-a", "team-b"} {
		e.kubectl(t, "create", "namespace", ns)
	}
	ref := func(kind, name string) rbacv1.RoleRef {
		return rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: kind, Name: name}
	}
	user := func(name string) []rbacv1.Subject {
		return []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: name}}
	}
	if _, err := e.kube.RbacV1().RoleBindings("team-a").Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "tenant-view"},
		RoleRef: ref("ClusterRole", "view"), Subjects: user("tenant")}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for name, role := range map[string]string{"viewer": "view", "operator": "platform-fleet-viewer"} {
		if _, err := e.kube.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name + "-" + role},
			RoleRef: ref("ClusterRole", role), Subjects: user(name)}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	kubectls := map[string]string{"1.37": filepath.Join(e.cp.BinDir(), "kubectl")}
	if _, err := os.Stat(olderKubectl); err == nil {
		kubectls["1.32"] = olderKubectl
	} else {
		t.Logf("no %s: checking the built kubectl only", olderKubectl)
	}
	dir := t.TempDir()
	file := func(name, text string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	local := func(cluster string) string {
		return file("local-"+cluster+".yaml", "apiVersion: platform.example.io/v1alpha1\nkind: LocalUsageReport\nspec:\n  cluster: "+cluster+"\n  window: 6h\n")
	}
	recommend := file("recommend.yaml", "apiVersion: platform.example.io/v1alpha1\nkind: LocalUsageReport\nspec:\n  cluster: prod-2\n  recommend: {}\n")
	report := func(name, spec string) string {
		return file(name+".yaml", "apiVersion: platform.example.io/v1alpha1\nkind: UsageReport\nspec:\n  window: 6h\n"+spec)
	}
	// Named so that a known and an unknown target's files differ only where
	// their names do.
	nodeReport, unknownNode := report("node-m03", "  cluster: prod-2\n  nodeName: m03\n"), report("node-m99", "  cluster: prod-2\n  nodeName: m99\n")
	memberReport, unknownMember := report("member-prod-2", "  cluster: prod-2\n"), report("member-prod-9", "  cluster: prod-9\n")
	selectionReport := report("selection", "  cluster: prod-2\n  nodeSelector: pool=big\n")
	namespaceReport := report("namespace", "  cluster: prod-2\n  namespace: team-a\n")

	// Polled until RBAC (and the aggregation of platform-viewer into view)
	// has reached the server's authorizer; every later answer must hold at once.
	clients := map[string]versioned.Interface{}
	kubeconfigs := map[string]string{}
	for _, name := range []string{"tenant", "viewer", "operator"} {
		cfg, kubeconfig, err := e.cp.UserConfig(name)
		if err != nil {
			t.Fatal(err)
		}
		clients[name], kubeconfigs[name] = versioned.NewForConfigOrDie(cfg), kubeconfig
	}
	for _, name := range []string{"tenant", "viewer"} {
		if err := pollAllowed(ctx, func() error {
			_, err := clients[name].PlatformV1alpha1().LocalUsageReports("team-a").Create(ctx, &v1alpha1.LocalUsageReport{
				Spec: v1alpha1.UsageReportSpec{Cluster: "prod-2", Window: metav1.Duration{Duration: time.Hour}}}, metav1.CreateOptions{})
			return err
		}); err != nil {
			t.Fatalf("%s asking team-a's usage with a LocalUsageReport: %v", name, err)
		}
	}
	if err := pollAllowed(ctx, func() error {
		_, err := clients["operator"].PlatformV1alpha1().UsageReports().Create(ctx, &v1alpha1.UsageReport{
			Spec: v1alpha1.UsageReportSpec{Cluster: "prod-2", Window: metav1.Duration{Duration: time.Hour}}}, metav1.CreateOptions{})
		return err
	}); err != nil {
		t.Fatalf("operator asking prod-2's usage: %v", err)
	}

	for version, kubectl := range kubectls {
		run := func(who string, args ...string) (string, string, error) {
			return e.cp.KubectlBinaryAs(ctx, kubectl, kubeconfigs[who], args...)
		}
		// answered runs kubectl create -o json as who and returns the status.
		answered := func(t *testing.T, who string, args ...string) v1alpha1.UsageReportStatus {
			t.Helper()
			out, stderr, err := run(who, append([]string{"create", "-o", "json"}, args...)...)
			if err != nil {
				t.Fatalf("kubectl %s as %s: %v\n%s", strings.Join(args, " "), who, err, stderr)
			}
			var got struct {
				Status v1alpha1.UsageReportStatus `json:"status"`
			}
			if err := json.Unmarshal([]byte(out), &got); err != nil {
				t.Fatalf("kubectl %s as %s: %v\n%s", strings.Join(args, " "), who, err, out)
			}
			return got.Status
		}
		// refused runs kubectl create as who, wants a 403 saying want and
		// returns kubectl's message.
		refused := func(t *testing.T, who, want string, args ...string) string {
			t.Helper()
			_, stderr, err := run(who, append([]string{"create"}, args...)...)
			if err == nil || !strings.Contains(stderr, "(Forbidden)") || !strings.Contains(stderr, want) {
				t.Errorf("kubectl create %s as %s: %v\n%s\nwant Forbidden saying %s", strings.Join(args, " "), who, err, stderr, want)
			}
			return strings.TrimSpace(stderr)
		}

		t.Run("kubectl "+version+" tenant", func(t *testing.T) {
			for _, member := range []string{"prod-1", "prod-2"} {
				st := answered(t, "tenant", "-n", "team-a", "-f", local(member))
				if member == "prod-2" && (st.Samples != int64(nsSamples) || st.CPU == nil) {
					t.Errorf("team-a's usage in prod-2: %+v, want %d samples", st, nsSamples)
				}
			}
			// Its own right-sized requests, and nobody else's.
			if st := answered(t, "tenant", "-n", "team-a", "-f", recommend); st.Recommendation == nil || st.Samples != int64(nsSamples) {
				t.Errorf("team-a's recommendation in prod-2: %+v", st)
			}
			refused(t, "tenant", `in the namespace "team-b"`, "-n", "team-b", "-f", recommend)
			teamB := refused(t, "tenant", `cannot create resource "localusagereports" in API group "platform.example.io" in the namespace "team-b"`, "-n", "team-b", "-f", local("prod-1"))
			unknown := refused(t, "tenant", `in the namespace "nope"`, "-n", "nope", "-f", local("prod-1"))
			if strings.ReplaceAll(unknown, "nope", "team-b") != teamB {
				t.Errorf("a namespace that does not exist is refused differently from one that does:\n%s\n%s", unknown, teamB)
			}
			for _, f := range []string{nodeReport, memberReport, namespaceReport} {
				refused(t, "tenant", `cannot create resource "usagereports" in API group "platform.example.io" at the cluster scope`, "-f", f)
			}
			// kubectl's default validation is the server's, and strict.
			bogus := file("bogus.yaml", "apiVersion: platform.example.io/v1alpha1\nkind: LocalUsageReport\nspec:\n  cluster: prod-2\n  window: 1h\n  bogus: 1\n")
			if _, stderr, err := run("tenant", "create", "-n", "team-a", "-f", bogus); err == nil || !strings.Contains(stderr, `unknown field "spec.bogus"`) {
				t.Errorf("an unknown field: %v %s; want it refused", err, stderr)
			}
		})

		t.Run("kubectl "+version+" cluster-wide view", func(t *testing.T) {
			answered(t, "viewer", "-n", "team-a", "-f", local("prod-2"))
			answered(t, "viewer", "-n", "team-b", "-f", local("prod-1"))
			if st := answered(t, "viewer", "-f", namespaceReport); st.Samples != int64(nsSamples) {
				t.Errorf("team-a's usage in prod-2 by UsageReport: %+v, want %d samples", st, nsSamples)
			}
			node := refused(t, "viewer", `cannot get resource "nodecapacities" in API group "platform.example.io" at the cluster scope (name "prod-2.m03")`, "-f", nodeReport)
			if other := refused(t, "viewer", `(name "prod-2.m99")`, "-f", unknownNode); strings.ReplaceAll(other, "m99", "m03") != node {
				t.Errorf("a node that does not exist is refused differently from one that does:\n%s\n%s", other, node)
			}
			member := refused(t, "viewer", `cannot get resource "clustercapacities" in API group "platform.example.io" at the cluster scope (name "prod-2")`, "-f", memberReport)
			if other := refused(t, "viewer", `(name "prod-9")`, "-f", unknownMember); strings.ReplaceAll(other, "prod-9", "prod-2") != member {
				t.Errorf("a member that does not exist is refused differently from one that does:\n%s\n%s", other, member)
			}
			refused(t, "viewer", `cannot list resource "nodecapacities"`, "-f", selectionReport)
		})

		t.Run("kubectl "+version+" fleet viewer", func(t *testing.T) {
			if st := answered(t, "operator", "-f", nodeReport); st.Nodes != 1 {
				t.Errorf("node m03: %+v", st)
			}
			if st := answered(t, "operator", "-f", selectionReport); st.Nodes != 5 {
				t.Errorf("pool=big: %+v, want 5 nodes", st)
			}
			answered(t, "operator", "-f", memberReport)
			answered(t, "operator", "-n", "team-a", "-f", local("prod-2"))
		})
	}

	t.Run("the views themselves", func(t *testing.T) {
		// What each may list, as the docs say: the tenant team-a's
		// ClusterNamespaces, the viewer every namespace's, neither a node.
		if _, err := clients["tenant"].PlatformV1alpha1().ClusterNamespaces("team-b").List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
			t.Errorf("tenant listing team-b: %v, want 403", err)
		}
		if l, err := clients["viewer"].PlatformV1alpha1().ClusterNamespaces("").List(ctx, metav1.ListOptions{}); err != nil || len(l.Items) == 0 {
			t.Errorf("viewer listing every namespace: %v", err)
		}
		for _, who := range []string{"tenant", "viewer"} {
			if _, err := clients[who].PlatformV1alpha1().NodeCapacities().List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
				t.Errorf("%s listing nodecapacities: %v, want 403", who, err)
			}
			if _, err := clients[who].PlatformV1alpha1().ClusterCapacities().Get(ctx, "prod-2", metav1.GetOptions{}); !apierrors.IsForbidden(err) {
				t.Errorf("%s getting clustercapacity prod-2: %v, want 403", who, err)
			}
		}
		if _, err := clients["operator"].PlatformV1alpha1().NodeCapacities().List(ctx, metav1.ListOptions{}); err != nil {
			t.Errorf("operator listing nodecapacities: %v", err)
		}
	})

	t.Run("a LocalUsageReport asks its own namespace", func(t *testing.T) {
		_, err := e.platform.PlatformV1alpha1().LocalUsageReports("team-a").Create(ctx, &v1alpha1.LocalUsageReport{
			Spec: v1alpha1.UsageReportSpec{Cluster: "prod-2", Namespace: "team-b", Window: metav1.Duration{Duration: time.Hour}}}, metav1.CreateOptions{})
		if !apierrors.IsBadRequest(err) || !strings.Contains(err.Error(), `create the report in "team-b"`) {
			t.Errorf("spec.namespace team-b in team-a: %v, want 400", err)
		}
	})

	t.Run("PATCH is not served", func(t *testing.T) {
		// What the OpenAPI document says of the PATCH kubectl looks for.
		err := e.platform.PlatformV1alpha1().RESTClient().Patch(types.MergePatchType).
			AbsPath("/apis/platform.example.io/v1alpha1/usagereports").Body([]byte(`{}`)).Do(ctx).Error()
		if !apierrors.IsMethodNotSupported(err) {
			t.Errorf("PATCH usagereports: %v, want 405", err)
		}
	})
}

// installViewerRoles creates the kustomize base's platform-viewer and
// platform-fleet-viewer ClusterRoles, as an install does.
func (e *env) installViewerRoles(t *testing.T) {
	root, err := framework.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	var roles []string
	for _, o := range parseDocs(t, e.kubectl(t, "kustomize", filepath.Join(root, "artifacts/kustomize/base"))) {
		if o.GetKind() == "ClusterRole" && (o.GetName() == "platform-viewer" || o.GetName() == "platform-fleet-viewer" || o.GetName() == "platform-capacity-viewer") {
			b, err := yaml.Marshal(o.Object)
			if err != nil {
				t.Fatal(err)
			}
			roles = append(roles, string(b))
		}
	}
	if len(roles) != 3 {
		t.Fatalf("the kustomize base has %d of the viewer ClusterRoles, want 3", len(roles))
	}
	path := filepath.Join(t.TempDir(), "roles.yaml")
	if err := os.WriteFile(path, []byte(strings.Join(roles, "---\n")), 0o600); err != nil {
		t.Fatal(err)
	}
	e.kubectl(t, "apply", "-f", path)
}
