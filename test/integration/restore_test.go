package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/example/platform-apiserver/test/framework"
	pgtest "github.com/example/platform-apiserver/test/framework/postgres"
)

// TestRegistryRestoredFromSnapshot: the registry's volume is restored from
// a snapshot taken a little earlier (the same timeline: no failover to
// see) while a watch and an informer are open, after changes they saw. The
// server finds the registry below versions it read, records it as a
// failover: the watch ends and its resume gets 410, so the client relists;
// versions handed out after it are past every one seen (the informer's
// never go back), discovery mirrors what the restore lost, and watcher,
// informer and mirror end equal to the member (docs/faults.md).
func TestRegistryRestoredFromSnapshot(t *testing.T) {
	t.Parallel()
	primary := pgtest.NewInstance(t, pgtest.Options{})
	e := newEnv(t, framework.Options{
		PlatformAPIServerBinary: os.Getenv("PLATFORM_APISERVER_BINARY"),
		DatabaseURL:             primary.DSN(),
		ExtraPlatformArgs:       []string{"--cluster-id=local", "--kubeconfig=kubeconfig", "--discovery-batch-delay=50ms"},
	})
	ctx := t.Context()
	eventually(t, "the mirror", mirrorTimeout, func(ctx context.Context) (bool, string) {
		d := e.mirrorDiff(ctx, "local")
		return d == "", d
	})
	snapshot := filepath.Join(t.TempDir(), "data")
	pauseAnd := func(what string, do func() error) {
		t.Helper()
		if err := primary.Pause(); err != nil {
			t.Fatal(err)
		}
		if err := do(); err != nil {
			t.Fatal(err)
		}
		if err := primary.Resume(ctx); err != nil {
			t.Fatal(err)
		}
		eventually(t, "readiness after "+what, mirrorTimeout, func(ctx context.Context) (bool, string) {
			code, body, err := probePlatform(ctx, e.cp, "/readyz?verbose")
			return err == nil && code == 200, fmt.Sprintf("%d %v\n%s", code, err, body)
		})
	}
	pauseAnd("the snapshot", func() error { return primary.Snapshot(snapshot) })

	watcher := startRelistingWatcher(t, e.platform)
	informer, _ := monotonicInformer(t, e.platform)
	for i := range 5 {
		if _, err := e.kube.CoreV1().Nodes().Create(ctx, testNode(fmt.Sprintf("after-snapshot-%d", i)), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "the watch sees the changes made after the snapshot", mirrorTimeout, func(context.Context) (bool, string) {
		return watcher.has("local.after-snapshot-4"), "not yet"
	})
	rewinds := func() float64 {
		n, err := e.platformMetric(ctx, "platform_registry_rewinds_total")
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := rewinds(); n != 0 {
		t.Fatalf("%v rewinds recorded before the restore", n)
	}

	restored := time.Now()
	pauseAnd("the restore", func() error { return primary.RestoreSnapshot(snapshot) })
	eventually(t, "the watcher relists after a 410", mirrorTimeout, func(context.Context) (bool, string) {
		return watcher.relistCount() > 0, "no relist yet"
	})
	t.Logf("the watcher relisted %s after the restore began (the server paused for it)", time.Since(restored).Round(100*time.Millisecond))
	if n := rewinds(); n != 1 {
		t.Errorf("rewinds recorded %v, want 1", n)
	}
	e.watchersHoldTheList(t, "after the restore", watcher, informer, true)
}
