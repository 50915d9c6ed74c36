package integration

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/example/platform-apiserver/test/framework"
	pgtest "github.com/example/platform-apiserver/test/framework/postgres"
)

// TestRegistryHungStandby: the streaming standby the server reads from
// hangs (SIGSTOP: its sockets stay open, nothing answers) while discovery
// mirrors a change every second. Lists keep answering within 2 s (a
// standby read gets a second, then the primary serves it and the standby
// is skipped), no connection of the server to the primary is cut (a
// standby's silence is not taken for the primary's), and no registry
// write fails; changes keep arriving (docs/faults.md).
func TestRegistryHungStandby(t *testing.T) {
	oneFaultTestAtATime(t)
	primary := pgtest.NewInstance(t, pgtest.Options{})
	standby := pgtest.NewStandby(t, primary, pgtest.StandbyOptions{})
	e := newEnv(t, framework.Options{
		PlatformAPIServerBinary: os.Getenv("PLATFORM_APISERVER_BINARY"),
		DatabaseURL:             primary.DSN(),
		ExtraPlatformArgs: []string{"--cluster-id=local", "--kubeconfig=kubeconfig", "--discovery-batch-delay=50ms",
			"--postgres-read-dsn=" + standby.DSN()},
	})
	t.Cleanup(func() { _ = standby.Thaw() }) // before the instance's Stop
	ctx := t.Context()
	eventually(t, "the mirror", mirrorTimeout, func(ctx context.Context) (bool, string) {
		d := e.mirrorDiff(ctx, "local")
		return d == "", d
	})
	ncs := e.platform.PlatformV1alpha1().NodeCapacities()
	eventually(t, "the standby serving reads", mirrorTimeout, func(ctx context.Context) (bool, string) {
		if _, err := ncs.List(ctx, metav1.ListOptions{}); err != nil {
			return false, err.Error()
		}
		n, err := e.platformMetric(ctx, "platform_registry_reads_total", `server="standby"`)
		return err == nil && n > 0, fmt.Sprintf("%v reads, %v", n, err)
	})

	db, err := pgx.Connect(ctx, primary.DSN())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close(context.Background()) })
	sessions := func() map[string]bool {
		t.Helper()
		rows, err := db.Query(ctx, `SELECT pid::text || '@' || backend_start::text FROM pg_stat_activity
			WHERE application_name LIKE 'platform-apiserver-%' AND application_name NOT LIKE '%listen%'`)
		if err != nil {
			t.Fatal(err)
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		set := map[string]bool{}
		for _, id := range ids {
			set[id] = true
		}
		return set
	}
	writeFailures := func() float64 {
		t.Helper()
		n, err := e.platformMetric(ctx, "platform_registry_write_failures_total")
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	before, failedBefore := sessions(), writeFailures()

	if err := standby.Freeze(); err != nil {
		t.Fatal(err)
	}
	frozen := time.Now()
	stop := e.createNodesEverySecond(t, "hung-standby")
	var slowest time.Duration
	for range 20 {
		lctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		start := time.Now()
		_, err := ncs.List(lctx, metav1.ListOptions{})
		took := time.Since(start)
		cancel()
		if err != nil {
			t.Fatalf("a list %s after the standby hung: %v", time.Since(frozen).Round(time.Millisecond), err)
		}
		slowest = max(slowest, took)
		time.Sleep(250 * time.Millisecond)
	}
	t.Logf("20 lists while the standby hangs: the slowest took %s", slowest.Round(time.Millisecond))
	if slowest > 2*time.Second {
		t.Errorf("a list took %s while the standby hangs, want at most 2 s (the primary answers)", slowest)
	}
	stop()
	eventually(t, "the changes made while the standby hangs mirrored", mirrorTimeout, func(ctx context.Context) (bool, string) {
		d := e.mirrorDiff(ctx, "local")
		return d == "", d
	})
	after := sessions()
	for id := range before {
		if !after[id] {
			t.Errorf("the server's primary session %s was cut while only the standby hung", id)
		}
	}
	if failed := writeFailures(); failed != failedBefore {
		t.Errorf("%v registry writes failed while only the standby hung, want none", failed-failedBefore)
	}
	if err := standby.Thaw(); err != nil {
		t.Fatal(err)
	}
}
