package integration

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/example/platform-apiserver/pkg/apis/platform/v1alpha1"
	"github.com/example/platform-apiserver/pkg/generated/clientset/versioned"
	"github.com/example/platform-apiserver/test/framework"
)

// TestQuotaReports asks whether 6 more cores of quota for team-a can be
// backed: prod-1 (one schedulable node of 3920m, team-a's quota already
// promising 4 cores) cannot under the default policy (no overcommit of
// requests), prod-2 (20 nodes, no quota) can; the numbers equal the
// test's own from the members' ClusterCapacities and team-a's quota. A
// tenant with view in team-a and the shipped platform-capacity-viewer asks
// its own namespace with a LocalQuotaReport and gets 403 for another one,
// the same for one that does not exist; bad proposals are 400s naming the
// field.
func TestQuotaReports(t *testing.T) {
	t.Parallel()
	e := setupWith(t, framework.Options{PlatformAPIServerBinary: os.Getenv("PLATFORM_APISERVER_BINARY"), StartControllerManager: true})
	ctx := t.Context()
	api := e.platform.PlatformV1alpha1()
	proposal := v1alpha1.QuotaReportSpec{Namespace: "team-a", Hard: map[string]resource.Quantity{"requests.cpu": resource.MustParse("6")}}
	report, err := api.QuotaReports().Create(ctx, &v1alpha1.QuotaReport{Spec: proposal}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cs := report.Status.Clusters
	if len(cs) != 2 || cs[0].Cluster != "prod-2" || cs[0].Verdict != v1alpha1.QuotaFits || cs[1].Cluster != "prod-1" || cs[1].Verdict != v1alpha1.QuotaExceedsPolicy {
		t.Fatalf("clusters %+v; want prod-2 Fits, then prod-1 ExceedsPolicy", cs)
	}
	// The test's own numbers, from what the API shows.
	for _, c := range cs {
		cc, err := api.ClusterCapacities().Get(ctx, c.Cluster, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ns, err := api.ClusterNamespaces("team-a").Get(ctx, c.Cluster, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var before, current resource.Quantity
		if cc.Status.Committed != nil {
			before = cc.Status.Committed.Hard["requests.cpu"]
		}
		for _, q := range ns.Status.Quotas { // the fixture's quotas have no scopes
			if h, ok := q.Hard["requests.cpu"]; ok && (current.IsZero() || h.Cmp(current) < 0) {
				current = h
			}
		}
		after := before.DeepCopy()
		after.Sub(current)
		after.Add(resource.MustParse("6"))
		alloc := cc.Status.Schedulable.Allocatable.CPU
		pct := int64(math.Ceil(after.AsApproximateFloat64() / alloc.AsApproximateFloat64() * 100))
		if len(c.Resources) != 1 {
			t.Fatalf("%s answers %+v, want requests.cpu alone", c.Cluster, c.Resources)
		}
		r := c.Resources[0]
		if r.Name != "requests.cpu" || r.CommittedBefore.Cmp(before) != 0 || r.CommittedAfter.Cmp(after) != 0 || r.Allocatable == nil ||
			r.Allocatable.Cmp(alloc) != 0 || r.PercentAfter == nil || *r.PercentAfter != pct || r.MaxPercent == nil || *r.MaxPercent != 100 ||
			r.Fits != (pct <= 100) || (current.IsZero() != (r.Current == nil)) {
			t.Errorf("%s requests.cpu %+v; want before %s, current %s, after %s of %s: %d%% of a 100%% bound", c.Cluster, r,
				before.String(), current.String(), after.String(), alloc.String(), pct)
		}
	}
	if !strings.Contains(cs[1].Reason, "requests.cpu: ") || !strings.Contains(cs[1].Reason, "more than 100%") {
		t.Errorf("prod-1's reason %q, want it to name requests.cpu and the bound", cs[1].Reason)
	}
	named, err := api.QuotaReports().Create(ctx, &v1alpha1.QuotaReport{Spec: v1alpha1.QuotaReportSpec{Namespace: "team-a", Clusters: []string{"prod-1"},
		Hard: map[string]resource.Quantity{"requests.cpu": resource.MustParse("3")}}}, metav1.CreateOptions{})
	if err != nil || len(named.Status.Clusters) != 1 || named.Status.Clusters[0].Verdict != v1alpha1.QuotaFits {
		t.Errorf("3 cores in place of team-a's 4 on prod-1 alone: %+v, %v; want Fits", named, err)
	}

	t.Run("bad proposals", func(t *testing.T) {
		for _, tc := range []struct {
			hard map[string]resource.Quantity
			want string
		}{
			{map[string]resource.Quantity{"requests.cpu": resource.MustParse("-2")}, "spec.hard[requests.cpu]: Invalid value: \"-2\": must not be negative"},
			{map[string]resource.Quantity{"requests.memory": resource.MustParse("1e20")}, "larger than any member could back"},
			{map[string]resource.Quantity{"requests.storage": resource.MustParse("1Ti")}, "spec.hard[requests.storage]: Unsupported value"},
			{nil, "spec.hard: Required value"},
		} {
			_, err := api.QuotaReports().Create(ctx, &v1alpha1.QuotaReport{Spec: v1alpha1.QuotaReportSpec{Namespace: "team-a", Hard: tc.hard}}, metav1.CreateOptions{})
			if !apierrors.IsBadRequest(err) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%v: %v, want a 400 saying %q", tc.hard, err, tc.want)
			}
		}
	})

	t.Run("a tenant asks its own namespace", func(t *testing.T) {
		e.installViewerRoles(t)
		for _, ns := range []string{"team-a", "team-b"} {
			e.kubectl(t, "create", "namespace", ns)
		}
		ref := func(kind, name string) rbacv1.RoleRef {
			return rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: kind, Name: name}
		}
		tenant := []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: "tenant"}}
		if _, err := e.kube.RbacV1().RoleBindings("team-a").Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "tenant-view"},
			RoleRef: ref("ClusterRole", "view"), Subjects: tenant}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := e.kube.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "tenant-capacity"},
			RoleRef: ref("ClusterRole", "platform-capacity-viewer"), Subjects: tenant}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		cfg, kubeconfig, err := e.cp.UserConfig("tenant")
		if err != nil {
			t.Fatal(err)
		}
		client := versioned.NewForConfigOrDie(cfg)
		var local *v1alpha1.LocalQuotaReport
		if err := pollAllowed(ctx, func() error {
			var err error
			local, err = client.PlatformV1alpha1().LocalQuotaReports("team-a").Create(ctx, &v1alpha1.LocalQuotaReport{
				Spec: v1alpha1.QuotaReportSpec{Hard: proposal.Hard}}, metav1.CreateOptions{})
			return err
		}); err != nil {
			t.Fatalf("the tenant asking for team-a: %v", err)
		}
		if len(local.Status.Clusters) != 2 || local.Status.Clusters[0].Cluster != "prod-2" {
			t.Errorf("the tenant's answer %+v, want the same members as the operator's", local.Status.Clusters)
		}
		file := filepath.Join(t.TempDir(), "quota.yaml")
		if err := os.WriteFile(file, []byte("apiVersion: platform.example.io/v1alpha1\nkind: LocalQuotaReport\nspec:\n  hard:\n    requests.cpu: \"6\"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		out, stderr, err := e.cp.KubectlAs(ctx, kubeconfig, "create", "-n", "team-a", "-f", file, "-o", "jsonpath={.status.clusters[*].verdict}")
		if err != nil || out != "Fits ExceedsPolicy" {
			t.Errorf("kubectl create -n team-a as the tenant: %q %v %s; want Fits ExceedsPolicy", out, err, stderr)
		}
		refused := func(ns string) string {
			_, stderr, err := e.cp.KubectlAs(ctx, kubeconfig, "create", "-n", ns, "-f", file)
			if err == nil || !strings.Contains(stderr, "(Forbidden)") || !strings.Contains(stderr, `cannot create resource "localquotareports"`) {
				t.Errorf("kubectl create -n %s as the tenant: %v %s; want Forbidden", ns, err, stderr)
			}
			return strings.TrimSpace(stderr)
		}
		if b, nope := refused("team-b"), refused("nope"); strings.ReplaceAll(nope, "nope", "team-b") != b {
			t.Errorf("a namespace that does not exist is refused differently from one that does:\n%s\n%s", nope, b)
		}
		_, err = client.PlatformV1alpha1().QuotaReports().Create(ctx, &v1alpha1.QuotaReport{Spec: proposal}, metav1.CreateOptions{})
		if !apierrors.IsForbidden(err) {
			t.Errorf("the tenant asking a cluster-wide QuotaReport: %v, want 403", err)
		}
	})
}
