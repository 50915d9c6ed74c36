package integration

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/example/platform-apiserver/test/framework"
	pgtest "github.com/example/platform-apiserver/test/framework/postgres"
)

// TestDiscoveryPostgresOutage takes the registry's PostgreSQL away while the
// member changes: readiness reports it, discovery retries with backoff, and
// once the database is back the mirror equals the member exactly.
func TestDiscoveryPostgresOutage(t *testing.T) {
	t.Parallel()
	db, err := pgtest.Start(t.Context(), pgtest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Stop() })
	e := newEnv(t, framework.Options{
		DatabaseURL:             db.DSN(),
		PlatformAPIServerBinary: os.Getenv("PLATFORM_APISERVER_BINARY"),
		ExtraPlatformArgs: []string{
			"--cluster-id=local",
			"--kubeconfig=kubeconfig",
			"--discovery-batch-delay=50ms",
		},
		StartControllerManager: true, // namespace deletion
	})
	ctx := t.Context()
	churn := func(prefix string, n int) {
		t.Helper()
		for i := range n {
			e.kubectl(t, "create", "namespace", fmt.Sprintf("%s-%d", prefix, i))
		}
	}
	churn("before", 5)
	eventually(t, "mirror in sync before the outage", mirrorTimeout, func(ctx context.Context) (bool, string) {
		d := e.mirrorDiff(ctx, "local")
		return d == "", d
	})

	if err := db.Pause(); err != nil {
		t.Fatal(err)
	}
	churn("during", 10)
	e.kubectl(t, "label", "namespace", "before-0", "outage=seen")
	e.kubectl(t, "delete", "namespace", "before-1", "--wait=false")

	eventually(t, "readyz reporting the registry down", mirrorTimeout, func(ctx context.Context) (bool, string) {
		code, body, err := probePlatform(ctx, e.cp, "/readyz?verbose")
		if err != nil {
			return false, err.Error()
		}
		return code != http.StatusOK && strings.Contains(body, "[-]registry failed"), body
	})

	if err := db.Resume(ctx); err != nil {
		t.Fatal(err)
	}
	eventually(t, "mirror equal to the member after the outage", 2*mirrorTimeout, func(ctx context.Context) (bool, string) {
		d := e.mirrorDiff(ctx, "local")
		return d == "", d
	})
	if got := e.jsonpath(ctx, "{.metadata.labels.outage}", "get", "clusternamespace", "local", "-n", "before-0"); got != "seen" {
		t.Errorf("label set during the outage = %q on the mirror, want seen", got)
	}
}
