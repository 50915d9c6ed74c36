package integration

import (
	"context"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/example/platform-apiserver/pkg/generated/clientset/versioned"
	"github.com/example/platform-apiserver/test/framework"
	pgtest "github.com/example/platform-apiserver/test/framework/postgres"
)

// TestRegistryUnavailable stops the registry's PostgreSQL under a running
// server: readiness must say so, reads must answer 503 with a message that
// names the registry, and liveness must hold (a restart would not help).
func TestRegistryUnavailable(t *testing.T) {
	t.Parallel()
	db, err := pgtest.Start(t.Context(), pgtest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Stop() })
	cp := framework.ForTest(t, framework.Options{
		DatabaseURL:             db.DSN(),
		PlatformAPIServerBinary: os.Getenv("PLATFORM_APISERVER_BINARY"),
	})
	ctx := t.Context()
	client := versioned.NewForConfigOrDie(cp.AdminConfig())
	if _, err := client.PlatformV1alpha1().NodeCapacities().List(ctx, metav1.ListOptions{}); err != nil {
		t.Fatalf("list with the registry up: %v", err)
	}

	if err := db.Stop(); err != nil {
		t.Fatal(err)
	}

	get := func(path string) (int, string) {
		code, body, err := probePlatform(ctx, cp, path)
		if err != nil {
			return 0, err.Error()
		}
		return code, body
	}

	var body string
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		var code int
		code, body = get("/readyz?verbose")
		return code == http.StatusInternalServerError && strings.Contains(body, "[-]registry failed"), nil
	})
	if err != nil {
		t.Fatalf("readyz never reported the registry down; last body:\n%s", body)
	}
	if code, body := get("/livez"); code != http.StatusOK {
		t.Errorf("livez = %d %s with the registry down; want 200 (restarting does not bring the database back)", code, body)
	}

	_, err = client.PlatformV1alpha1().NodeCapacities().List(ctx, metav1.ListOptions{})
	if !apierrors.IsServiceUnavailable(err) || !strings.Contains(err.Error(), "registry unavailable") {
		t.Errorf("list with the registry down: %v, want 503 naming the registry", err)
	}
}
