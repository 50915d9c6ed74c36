package integration

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/example/platform-apiserver/pkg/apis/platform/v1alpha1"
	"github.com/example/platform-apiserver/test/framework"
)

// staleAfter is the server's --member-stale-after in TestMemberFreshness:
// the least it accepts.
const staleAfter = 2 * time.Minute

// TestMemberFreshness: freshness is measured end to end, from the member's
// mirror heartbeat, and the write path cannot wedge (issue 50,
// docs/faults.md).
//
// First 100,000 writers abort after taking a commit ticket (what a long run
// of failed commits leaves behind); a label change on a member node then
// reaches its NodeCapacity within 10 s. Then every registry write fails
// (a trigger the test installs raises on each publish): within
// --member-stale-after plus a minute, kubectl shows the member Stale with
// its data age (and its NodeCapacities and ClusterNamespaces with -o wide)
// and a PlacementReport answers it stale with the age, though
// the member's recorded state never changed (nothing could record it).
// When writes work again, the member is Synced again and every change made
// meanwhile arrives.
func TestMemberFreshness(t *testing.T) {
	oneFaultTestAtATime(t)
	e := newEnv(t, framework.Options{
		PlatformAPIServerBinary: os.Getenv("PLATFORM_APISERVER_BINARY"),
		ExtraPlatformArgs: []string{"--cluster-id=local", "--kubeconfig=kubeconfig", "--discovery-batch-delay=50ms",
			"--member-stale-after=" + staleAfter.String()},
	})
	ctx := t.Context()
	if _, err := e.kube.CoreV1().Nodes().Create(ctx, testNode("probe"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the mirror", mirrorTimeout, func(ctx context.Context) (bool, string) {
		d := e.mirrorDiff(ctx, "local")
		return d == "", d
	})
	db, err := pgx.Connect(ctx, e.cp.DatabaseURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close(context.Background()) })

	t.Run("aborted writers do not wedge later commits", func(t *testing.T) {
		const aborted = 100_000
		start := time.Now()
		if err := abortTickets(ctx, db, aborted); err != nil {
			t.Fatal(err)
		}
		t.Logf("%d writers took a commit ticket and rolled back in %s", aborted, time.Since(start).Round(time.Millisecond))
		labeled := time.Now()
		e.kubectl(t, "label", "node", "probe", "wave=1")
		eventually(t, "the label change on the NodeCapacity", 10*time.Second, func(ctx context.Context) (bool, string) {
			got := e.jsonpath(ctx, "{.metadata.labels.wave}", "get", "nodecapacity", "local.probe")
			return got == "1", got
		})
		t.Logf("the label change reached its NodeCapacity %s after it", time.Since(labeled).Round(10*time.Millisecond))
	})

	t.Run("a member whose writes fail is shown stale", func(t *testing.T) {
		eventually(t, "the member's heartbeat", 2*time.Minute, func(ctx context.Context) (bool, string) {
			cc, err := e.platform.PlatformV1alpha1().ClusterCapacities().Get(ctx, "local", metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			m := cc.Status.Mirroring
			return m.State == v1alpha1.MirroringSynced && m.CompleteAsOf != nil, fmt.Sprintf("%+v", m)
		})
		if _, err := db.Exec(ctx, `CREATE FUNCTION test_refuse_writes() RETURNS trigger LANGUAGE plpgsql AS $$
			BEGIN RAISE EXCEPTION 'registry writes refused by TestMemberFreshness'; END $$;
			CREATE TRIGGER test_refuse_writes BEFORE UPDATE ON registry_state FOR EACH STATEMENT EXECUTE FUNCTION test_refuse_writes()`); err != nil {
			t.Fatal(err)
		}
		refused := time.Now()
		repaired := false
		repair := func() {
			if !repaired {
				repaired = true
				if _, err := db.Exec(context.Background(), `DROP TRIGGER test_refuse_writes ON registry_state; DROP FUNCTION test_refuse_writes()`); err != nil {
					t.Error(err)
				}
			}
		}
		t.Cleanup(repair)
		e.kubectl(t, "label", "node", "probe", "wave=2", "--overwrite")
		if _, err := e.kube.CoreV1().Nodes().Create(ctx, testNode("made-while-stale"), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}

		eventually(t, "kubectl get cc shows the member Stale", staleAfter+90*time.Second, func(ctx context.Context) (bool, string) {
			out, _, err := e.cp.Kubectl(ctx, "get", "clustercapacity", "local", "-o", "wide")
			return err == nil && strings.Contains(out, "Stale"), fmt.Sprintf("%v\n%s", err, out)
		})
		t.Logf("the member shows Stale %s after its writes began to fail (--member-stale-after %s)", time.Since(refused).Round(time.Second), staleAfter)
		cc, err := e.platform.PlatformV1alpha1().ClusterCapacities().Get(ctx, "local", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		m := cc.Status.Mirroring
		if m.State != v1alpha1.MirroringStale || m.DataAge == nil || m.DataAge.Duration <= staleAfter {
			t.Errorf("mirroring %+v; want Stale with a data age past %s", m, staleAfter)
		}
		if c := meta.FindStatusCondition(cc.Status.Conditions, "Synced"); c == nil || c.Status != metav1.ConditionFalse || c.Reason != "Stale" ||
			!strings.Contains(c.Message, "last recorded the member Synced") {
			t.Errorf("condition Synced %+v; want False, reason Stale, naming the recorded state Synced", c)
		}
		report, err := e.platform.PlatformV1alpha1().PlacementReports().Create(ctx, &v1alpha1.PlacementReport{
			Spec: v1alpha1.PlacementReportSpec{Clusters: []string{"local"}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if fits := report.Status.Clusters; len(fits) != 1 || !fits[0].Stale || fits[0].Mirroring != v1alpha1.MirroringStale ||
			fits[0].DataAge == nil || fits[0].DataAge.Duration <= staleAfter {
			t.Errorf("placement report %+v; want local stale, as Stale, with a data age past %s", fits, staleAfter)
		}
		for _, args := range [][]string{{"nodecapacity", "local.probe"}, {"clusternamespace", "local", "-n", "default"}} {
			out := e.kubectl(t, append([]string{"get", "-o", "wide"}, args...)...)
			lines := strings.Split(strings.TrimSpace(out), "\n")
			var age time.Duration
			if len(lines) == 2 {
				cells := strings.Fields(lines[1])
				age, _ = time.ParseDuration(cells[len(cells)-1])
			}
			if len(lines) != 2 || !strings.HasSuffix(lines[0], "MEMBER DATA AGE") || age <= staleAfter {
				t.Errorf("kubectl get %s -o wide while the member is stale:\n%s\nwant its MEMBER DATA AGE past %s", args[0], out, staleAfter)
			}
		}
		if got := e.jsonpath(ctx, "{.metadata.labels.wave}", "get", "nodecapacity", "local.probe"); got != "1" {
			t.Fatalf("the NodeCapacity shows wave=%q while every write fails; the test's trigger did not refuse them", got)
		}

		repair()
		eventually(t, "the member Synced again, every change made meanwhile mirrored", 2*mirrorTimeout, func(ctx context.Context) (bool, string) {
			cc, err := e.platform.PlatformV1alpha1().ClusterCapacities().Get(ctx, "local", metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			d := e.mirrorDiff(ctx, "local")
			wave := e.jsonpath(ctx, "{.metadata.labels.wave}", "get", "nodecapacity", "local.probe")
			return cc.Status.Mirroring.State == v1alpha1.MirroringSynced && d == "" && wave == "2",
				fmt.Sprintf("state %s, wave %q, diff %s", cc.Status.Mirroring.State, wave, d)
		})
	})
}

// abortTickets runs n transactions that take a commit ticket and roll back,
// pipelined in batches: what a run of failed commits leaves behind.
func abortTickets(ctx context.Context, db *pgx.Conn, n int) error {
	const perBatch = 2000
	for done := 0; done < n; done += perBatch {
		b := &pgx.Batch{}
		for range min(perBatch, n-done) {
			b.Queue("BEGIN")
			b.Queue("SELECT registry_take_ticket()")
			b.Queue("ROLLBACK")
		}
		if err := db.SendBatch(ctx, b).Close(); err != nil {
			return fmt.Errorf("aborted writers %d-%d: %w", done, done+perBatch, err)
		}
	}
	return nil
}
