package framework_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/example/platform-apiserver/test/framework"
)

// envPlatformBinary names a prebuilt platform-apiserver to test instead of
// building ./cmd/apiserver.
const envPlatformBinary = "PLATFORM_APISERVER_BINARY"

func TestMain(m *testing.M) {
	os.Exit(framework.RunTests(m))
}

func TestControlPlane(t *testing.T) {
	cp := framework.ForTest(t, framework.Options{
		PlatformAPIServerBinary: os.Getenv(envPlatformBinary),
		StartControllerManager:  true,
	})
	ctx := t.Context()

	t.Run("kube-apiserver ready", func(t *testing.T) {
		out, _, err := cp.Kubectl(ctx, "get", "--raw", "/readyz")
		if err != nil || strings.TrimSpace(out) != "ok" {
			t.Fatalf("kubectl get --raw /readyz = %q, %v; want ok", out, err)
		}
	})

	t.Run("APIService available", func(t *testing.T) {
		out, _, err := cp.Kubectl(ctx, "get", "apiservice", framework.APIServiceName,
			"-o", `jsonpath={.status.conditions[?(@.type=="Available")].status}`)
		if err != nil || out != "True" {
			t.Fatalf("APIService %s Available = %q, %v; want True", framework.APIServiceName, out, err)
		}
	})

	t.Run("api-resources lists the platform resources", func(t *testing.T) {
		assertPlatformResources(ctx, t, cp)
	})

	t.Run("platform-apiserver reachable directly", func(t *testing.T) {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(cp.PlatformServingCA()) {
			t.Fatal("PlatformServingCA holds no certificate")
		}
		client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
		resp, err := client.Get(cp.PlatformServerURL() + "/readyz")
		if err != nil {
			t.Fatalf("GET %s/readyz: %v", cp.PlatformServerURL(), err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s/readyz: %s, want 200", cp.PlatformServerURL(), resp.Status)
		}
	})

	t.Run("user without RBAC is forbidden", func(t *testing.T) {
		_, kubeconfig, err := cp.UserConfig("alice", "team-a")
		if err != nil {
			t.Fatal(err)
		}
		_, stderr, err := cp.KubectlAs(ctx, kubeconfig, "get", "namespaces")
		if err == nil || !strings.Contains(stderr, "Forbidden") {
			t.Fatalf("alice listing namespaces: err=%v stderr=%q; want Forbidden", err, stderr)
		}
		if !strings.Contains(stderr, `User "alice"`) {
			t.Fatalf("forbidden message does not name user alice: %q", stderr)
		}
	})

	t.Run("namespace deletion completes", func(t *testing.T) {
		client, err := kubernetes.NewForConfig(cp.AdminConfig())
		if err != nil {
			t.Fatal(err)
		}
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "framework-delete-me"}}
		if _, err := client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := client.CoreV1().Namespaces().Delete(ctx, ns.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			_, err := client.CoreV1().Namespaces().Get(ctx, ns.Name, metav1.GetOptions{})
			return apierrors.IsNotFound(err), nil
		})
		if err != nil {
			t.Fatalf("namespace %s still present (is kube-controller-manager running?): %v", ns.Name, err)
		}
	})

	t.Run("platform-apiserver survives SIGKILL and restart", func(t *testing.T) {
		before := cp.PlatformAPIServerPID()
		if err := cp.KillPlatformAPIServer(); err != nil {
			t.Fatal(err)
		}
		if pid := cp.PlatformAPIServerPID(); pid != 0 {
			t.Fatalf("PlatformAPIServerPID after kill = %d, want 0", pid)
		}
		if err := cp.StartPlatformAPIServer(ctx); err != nil {
			t.Fatal(err)
		}
		if after := cp.PlatformAPIServerPID(); after == 0 || after == before {
			t.Fatalf("PlatformAPIServerPID = %d after restart, want a new pid (was %d)", after, before)
		}
		if err := cp.RestartPlatformAPIServer(ctx); err != nil {
			t.Fatal(err)
		}
		assertPlatformResources(ctx, t, cp)
	})
}

func assertPlatformResources(ctx context.Context, t *testing.T, cp *framework.ControlPlane) {
	t.Helper()
	out, _, err := cp.Kubectl(ctx, "api-resources", "--api-group="+framework.PlatformGroup, "-o", "name")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"nodecapacities." + framework.PlatformGroup, "clusternamespaces." + framework.PlatformGroup} {
		if !strings.Contains(out, want) {
			t.Errorf("kubectl api-resources --api-group=%s lacks %s; got:\n%s", framework.PlatformGroup, want, out)
		}
	}
}
