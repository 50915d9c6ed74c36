package framework

import (
	"os"
	"testing"

	"github.com/example/platform-apiserver/test/framework/postgres"
)

// ForTest starts a control plane for t and stops it in t.Cleanup. It fails the
// test (never skips it) when the stack cannot start. Without
// Options.DatabaseURL the platform-apiserver gets a fresh database on the test
// binary's shared PostgreSQL (or on TEST_DATABASE_URL); call
// postgres.RunTests from TestMain so that server stops with the binary.
// When the test fails, the work directory and its logs are kept and named.
func ForTest(t testing.TB, opts Options) *ControlPlane {
	t.Helper()
	if opts.DatabaseURL == "" && !opts.WithoutPlatform {
		opts.DatabaseURL = postgres.NewTestDatabase(t)
	}
	cp, err := Start(t.Context(), opts)
	if err != nil {
		t.Fatalf("start control plane: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() && opts.WorkDir == "" {
			cp.keepWorkDir()
			t.Logf("control plane logs kept in %s", cp.WorkDir())
		}
		if err := cp.Stop(); err != nil {
			t.Errorf("stop control plane: %v", err)
		}
	})
	return cp
}

// RunTests runs a test binary's tests, then stops its shared PostgreSQL and
// removes its shared platform-apiserver build. Call it from TestMain:
// os.Exit(framework.RunTests(m)).
func RunTests(m *testing.M) int {
	code := postgres.RunTests(m)
	if platformBuild.dir != "" {
		_ = os.RemoveAll(platformBuild.dir)
	}
	return code
}
