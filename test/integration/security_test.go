package integration

import (
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/example/platform-apiserver/pkg/apis/platform/v1alpha1"
	"github.com/example/platform-apiserver/pkg/generated/clientset/versioned"
	"github.com/example/platform-apiserver/test/framework"
)

func (e *env) testRBAC(t *testing.T) {
	ctx := t.Context()
	// Team A may read clusternamespaces in its own namespace only.
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "platform-view", Namespace: "team-a"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{"platform.example.io"}, Resources: []string{"clusternamespaces"}, Verbs: []string{"get", "list", "watch"}}},
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "team-a-platform-view", Namespace: "team-a"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "platform-view"},
		Subjects:   []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "Group", Name: "team-a"}},
	}
	for _, ns := range []string{"team-a", "team-b"} {
		e.kubectl(t, "create", "namespace", ns)
	}
	if _, err := e.kube.RbacV1().Roles("team-a").Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.kube.RbacV1().RoleBindings("team-a").Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cfg, kubeconfig, err := e.cp.UserConfig("alice", "team-a")
	if err != nil {
		t.Fatal(err)
	}
	alice := versioned.NewForConfigOrDie(cfg)

	// RBAC bindings take effect asynchronously in kube-apiserver's cache; the
	// first allowed call is polled for, every later one must hold at once.
	if err := pollAllowed(ctx, func() error {
		_, err := alice.PlatformV1alpha1().ClusterNamespaces("team-a").List(ctx, metav1.ListOptions{})
		return err
	}); err != nil {
		t.Fatalf("alice listing team-a: %v", err)
	}
	out, stderr, err := e.cp.KubectlAs(ctx, kubeconfig, "get", "cns", "-n", "team-a", "-o", "name")
	if err != nil || len(strings.Fields(out)) != fixtureClusterNSTeamA {
		t.Errorf("alice: kubectl get cns -n team-a = %q, %v %s", out, err, stderr)
	}
	forbidden := map[string]func() error{
		"list team-b": func() error {
			_, err := alice.PlatformV1alpha1().ClusterNamespaces("team-b").List(ctx, metav1.ListOptions{})
			return err
		},
		"list all namespaces": func() error {
			_, err := alice.PlatformV1alpha1().ClusterNamespaces("").List(ctx, metav1.ListOptions{})
			return err
		},
		"get nodecapacity": func() error {
			_, err := alice.PlatformV1alpha1().NodeCapacities().Get(ctx, "prod-1.n1", metav1.GetOptions{})
			return err
		},
		"get clustercapacity": func() error {
			_, err := alice.PlatformV1alpha1().ClusterCapacities().Get(ctx, "prod-1", metav1.GetOptions{})
			return err
		},
		"list clustercapacities": func() error {
			_, err := alice.PlatformV1alpha1().ClusterCapacities().List(ctx, metav1.ListOptions{})
			return err
		},
		"create usagereport": func() error {
			_, err := alice.PlatformV1alpha1().UsageReports().Create(ctx, &v1alpha1.UsageReport{
				Spec: v1alpha1.UsageReportSpec{Cluster: "prod-1", Window: metav1.Duration{Duration: time.Hour}}}, metav1.CreateOptions{})
			return err
		},
		"watch clustercapacities": func() error {
			w, err := alice.PlatformV1alpha1().ClusterCapacities().Watch(ctx, metav1.ListOptions{})
			if err == nil {
				w.Stop()
			}
			return err
		},
	}
	for name, call := range forbidden {
		if err := call(); !apierrors.IsForbidden(err) {
			t.Errorf("alice %s: %v, want 403 Forbidden", name, err)
		}
	}
	for _, resource := range []string{"nodecapacities", "clustercapacities"} {
		if stderr := e.kubectlFails(ctx, t, kubeconfig, "get", resource); !strings.Contains(stderr, "forbidden") {
			t.Errorf("alice kubectl get %s: %s, want forbidden", resource, stderr)
		}
	}
}

func (e *env) testDirectAccess(t *testing.T) {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(e.cp.PlatformServingCA())
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	url := e.cp.PlatformServerURL() + "/apis/platform.example.io/v1alpha1/nodecapacities"

	tests := []struct {
		name    string
		headers map[string]string
	}{
		{"no credentials", nil},
		{"forged front-proxy headers without the proxy's client certificate", map[string]string{"X-Remote-User": "admin", "X-Remote-Group": "system:masters"}},
		{"invalid bearer token", map[string]string{"Authorization": "Bearer not-a-token"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
			if err != nil {
				t.Fatal(err)
			}
			for k, v := range tt.headers {
				req.Header.Set(k, v)
			}
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized && resp.StatusCode != http.StatusForbidden {
				t.Errorf("status %d, want 401 or 403", resp.StatusCode)
			}
		})
	}
	t.Run("readyz reports the registry", func(t *testing.T) {
		resp, err := client.Get(e.cp.PlatformServerURL() + "/readyz?verbose")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body := make([]byte, 64<<10)
		n, _ := resp.Body.Read(body)
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body[:n]), "[+]registry ok") {
			t.Errorf("readyz = %d:\n%s", resp.StatusCode, body[:n])
		}
	})
}

func (e *env) testArtifacts(t *testing.T) {
	root, err := framework.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	// The kustomize base as kubectl renders it; install_test.go installs it
	// (and every other variant) for real.
	out := e.kubectl(t, "kustomize", filepath.Join(root, "artifacts/kustomize/base"))
	if strings.Contains(out, "insecureSkipTLSVerify") || !strings.Contains(out, "kind: APIService") {
		t.Fatalf("the base must register the APIService and never skip TLS verification:\n%s", out)
	}
	// The stack already runs its own platform-system; check the manifests in
	// a namespace of their own so nothing collides with it.
	dir := t.TempDir()
	renamed := strings.ReplaceAll(out, "platform-system", "artifacts-check")
	if err := os.WriteFile(filepath.Join(dir, "base.yaml"), []byte(renamed), 0o600); err != nil {
		t.Fatal(err)
	}
	e.kubectl(t, "create", "namespace", "artifacts-check")
	// Server-side dry run validates every manifest against the real API
	// without changing anything.
	e.kubectl(t, "apply", "--dry-run=server", "-f", dir)
}
