// Package integration tests the platform API as users see it: through
// kube-apiserver's aggregator, with real kubectl and the generated clientset,
// over a registry in a real PostgreSQL.
package integration

import (
	"context"
	"os"
	"strings"
	"testing"

	"k8s.io/client-go/kubernetes"

	"github.com/example/platform-apiserver/pkg/generated/clientset/versioned"
	"github.com/example/platform-apiserver/pkg/registry/postgres"
	"github.com/example/platform-apiserver/test/framework"
)

func TestMain(m *testing.M) {
	os.Exit(framework.RunTests(m))
}

// env is one running stack with the fixture written to its registry.
type env struct {
	cp       *framework.ControlPlane
	platform versioned.Interface
	kube     kubernetes.Interface
	store    *postgres.Store
}

func setup(t *testing.T) *env {
	t.Helper()
	return setupWith(t, framework.Options{PlatformAPIServerBinary: os.Getenv("PLATFORM_APISERVER_BINARY")})
}

// setupWith starts a stack with opts and writes the fixture to its registry.
func setupWith(t *testing.T, opts framework.Options) *env {
	t.Helper()
	e := newEnv(t, opts)
	if err := writeFixture(t.Context(), e.store); err != nil {
		t.Fatalf("write fixture: %v", err)
	}
	return e
}

// newEnv starts a stack with opts and an empty registry: discovery tests
// use it, since discovery deletes clusters it is not configured for.
func newEnv(t *testing.T, opts framework.Options) *env {
	t.Helper()
	cp := framework.ForTest(t, opts)
	reg, err := postgres.Open(t.Context(), cp.DatabaseURL(), postgres.Options{})
	if err != nil {
		t.Fatalf("open registry: %v", err)
	}
	t.Cleanup(reg.Close)
	return &env{
		cp:       cp,
		platform: versioned.NewForConfigOrDie(cp.AdminConfig()),
		kube:     kubernetes.NewForConfigOrDie(cp.AdminConfig()),
		store:    reg,
	}
}

// kubectl runs kubectl as the admin and fails the test on error.
func (e *env) kubectl(t *testing.T, args ...string) string {
	t.Helper()
	out, stderr, err := e.cp.Kubectl(t.Context(), args...)
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, stderr)
	}
	return out
}

// kubectlFails runs kubectl expecting it to fail and returns its stderr.
func (e *env) kubectlFails(ctx context.Context, t *testing.T, kubeconfig string, args ...string) string {
	t.Helper()
	out, stderr, err := e.cp.KubectlAs(ctx, kubeconfig, args...)
	if err == nil {
		t.Fatalf("kubectl %s succeeded, want an error; output:\n%s", strings.Join(args, " "), out)
	}
	return stderr
}

// TestReadPath runs every read-path behaviour against one stack; each
// subtest reads only, so they share the fixture.
func TestReadPath(t *testing.T) {
	t.Parallel()
	e := setup(t)
	t.Run("kubectl tables", e.testTables)
	t.Run("kubectl yaml", e.testYAML)
	t.Run("label selectors", e.testLabelSelectors)
	t.Run("field selectors", e.testFieldSelectors)
	t.Run("pagination", e.testPagination)
	t.Run("clientset", e.testClientset)
	t.Run("discovery and explain", e.testDiscovery)
	t.Run("writes are not served", e.testWritesRejected)
	t.Run("bad input", e.testBadInput)
	t.Run("hostile input", e.testHostileInput)
	t.Run("rbac", e.testRBAC)
	t.Run("direct access", e.testDirectAccess)
	t.Run("profiling", e.testProfiling)
	t.Run("priority and fairness", e.testPriorityAndFairness)
	t.Run("artifacts", e.testArtifacts)
}
