package bench

import (
	"context"
	"fmt"
	"testing"
	"time"

	kueueconfig "sigs.k8s.io/kueue/apis/config/v1beta2"

	"github.com/example/platform-apiserver/test/framework"
	"github.com/example/platform-apiserver/test/framework/postgres"
)

// kueueBatches is how many batches of the dispatch scenario each
// dispatcher is timed over (20 Jobs each).
const kueueBatches = 3

// BenchmarkKueueDispatch measures, on Kueue v0.17.0's MultiKueue with a
// manager and two workers (framework.TwoWorkerKueueFleet), the time from a
// Workload's quota reservation in the manager to a worker's admission
// (status.clusterName set), as watches see them, over batches of the
// scenario's 20 mixed Jobs submitted at once: by platform-kueue-dispatcher
// (issue 52), by Kueue's AllAtOnce and by its Incremental, one after the
// other on the same fleet, each batch's Jobs deleted before the next. It
// also reports the remote Workloads created per Job and the pods that no
// node of the worker that admitted their Job could take.
func BenchmarkKueueDispatch(b *testing.B) {
	ctx := b.Context()
	pg, err := postgres.Start(ctx, postgres.Options{})
	must(b, err)
	defer func() { must(b, pg.Stop()) }()
	opts := framework.TwoWorkerKueueFleet("platform.example.io/kueue-dispatcher")
	opts.DatabaseURL = pg.DSN()
	f, err := framework.StartKueueFleet(ctx, opts)
	must(b, err)
	defer func() { must(b, f.Stop()) }()

	modes := []struct{ name, dispatcherName string }{
		{"dispatcher", "platform.example.io/kueue-dispatcher"},
		{"AllAtOnce", kueueconfig.MultiKueueDispatcherModeAllAtOnce},
		{"Incremental", kueueconfig.MultiKueueDispatcherModeIncremental},
	}
	for _, mode := range modes {
		b.Run(mode.name, func(b *testing.B) {
			must(b, f.StopDispatcher())
			must(b, f.ManagerKueue.Restart(ctx, framework.KueueOptions{DispatcherName: mode.dispatcherName}))
			if mode.name == "dispatcher" {
				must(b, f.StartDispatcher(ctx, f.Manager.AdminKubeconfig(), "--settle=10s"))
			}
			var admit latencies
			var jobs, remote, unbound int
			loopOnce(b, func() {
				for i := range kueueBatches {
					batch, _ := framework.MixedJobs(f.Namespace, fmt.Sprintf("%s-%d", shortName(mode.name), i))
					out, err := f.RunBatch(ctx, batch, 5*time.Minute)
					must(b, err)
					admit.add(out.ReservationToAdmission()...)
					for _, o := range out {
						jobs++
						for _, n := range o.Remote {
							remote += n
						}
					}
					unbound += countUnbound(ctx, b, f)
					must(b, f.DeleteJobs(ctx, 3*time.Minute))
				}
			})
			s := admit.summary()
			s.report(b, "admit-", true)
			b.ReportMetric(float64(remote)/float64(jobs), "remote-workloads/job")
			b.ReportMetric(float64(unbound)/kueueBatches, "unbound-pods/batch")
			summary.printf("Kueue dispatch", "%-11s reservation → admission %s; %.1f remote Workloads per Job; %.1f pods per batch on no node",
				mode.name, s, float64(remote)/float64(jobs), float64(unbound)/kueueBatches)
		})
	}
}

func shortName(mode string) string {
	switch mode {
	case "AllAtOnce":
		return "aao"
	case "Incremental":
		return "inc"
	}
	return "d"
}

// countUnbound waits for the batch's pods to be created and scheduled
// (10 s) and counts those no node took.
func countUnbound(ctx context.Context, b *testing.B, f *framework.KueueFleet) int {
	time.Sleep(10 * time.Second)
	pods, err := f.WorkerPods(ctx)
	must(b, err)
	n := 0
	for _, ps := range pods {
		for _, p := range ps {
			if p.Spec.NodeName == "" {
				n++
			}
		}
	}
	return n
}
