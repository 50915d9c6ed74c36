package bench

import (
	"context"
	"fmt"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
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
// node of the worker that admitted their Job could take, the dispatcher's
// own time per decision (its metrics), and, as an overload, one burst of
// 100 Jobs at once (burst-100) to the dispatcher.
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

	const platformDispatcher = "platform.example.io/kueue-dispatcher"
	modes := []struct {
		name, dispatcherName string
		batches              int
		jobs                 func(prefix string) []*batchv1.Job
	}{
		{"dispatcher", platformDispatcher, kueueBatches, mixedJobs(f)},
		{"AllAtOnce", kueueconfig.MultiKueueDispatcherModeAllAtOnce, kueueBatches, mixedJobs(f)},
		{"Incremental", kueueconfig.MultiKueueDispatcherModeIncremental, kueueBatches, mixedJobs(f)},
		// 100 half-core Jobs at once: 50 of the fleet's 64 CPUs.
		{"dispatcher/burst-100", platformDispatcher, 1, func(prefix string) []*batchv1.Job {
			var jobs []*batchv1.Job
			for i := range 100 {
				jobs = append(jobs, framework.MixedJobShapes[3].Job(f.Namespace, fmt.Sprintf("%s-%d", prefix, i)))
			}
			return jobs
		}},
	}
	for _, mode := range modes {
		b.Run(mode.name, func(b *testing.B) {
			must(b, f.StopDispatcher())
			must(b, f.ManagerKueue.Restart(ctx, framework.KueueOptions{DispatcherName: mode.dispatcherName}))
			if mode.dispatcherName == platformDispatcher {
				must(b, f.StartDispatcher(ctx, f.Manager.AdminKubeconfig(), "--settle=10s"))
			}
			var admit latencies
			var jobs, remote, unbound, first int
			loopOnce(b, func() {
				for i := range mode.batches {
					batch := mode.jobs(fmt.Sprintf("%s-%d", shortName(mode.name), i))
					out, err := f.RunBatch(ctx, batch, 5*time.Minute)
					must(b, err)
					admit.add(out.ReservationToAdmission()...)
					for _, o := range out {
						jobs++
						for _, n := range o.Remote {
							remote += n
						}
						if len(o.Nominations) > 0 && len(o.Nominations[0]) == 1 && o.Nominations[0][0] == o.Cluster {
							first++
						}
					}
					unbound += countUnbound(ctx, b, f)
					must(b, f.DeleteJobs(ctx, 3*time.Minute))
				}
			})
			s := admit.summary()
			s.report(b, "admit-", true)
			b.ReportMetric(float64(remote)/float64(jobs), "remote-workloads/job")
			b.ReportMetric(float64(unbound)/float64(mode.batches), "unbound-pods/batch")
			b.ReportMetric(float64(first)/float64(jobs), "first-nominee/job")
			line := fmt.Sprintf("%-20s reservation → admission %s; %.1f remote Workloads per Job; %d of %d admitted by the first nominee; %.1f pods per batch on no node",
				mode.name, s, float64(remote)/float64(jobs), first, jobs, float64(unbound)/float64(mode.batches))
			if mode.dispatcherName == platformDispatcher {
				var decisions, decided, reports, asked float64
				must(b, readCounters(ctx, f.DispatcherMetrics,
					counter{&decisions, "platform_dispatcher_decision_duration_seconds_sum", nil},
					counter{&decided, "platform_dispatcher_decision_duration_seconds_count", nil},
					counter{&reports, "platform_dispatcher_placement_report_duration_seconds_sum", nil},
					counter{&asked, "platform_dispatcher_placement_report_duration_seconds_count", nil}))
				b.ReportMetric(1000*decisions/decided, "decision-ms/workload")
				b.ReportMetric(1000*reports/asked, "placementreport-ms")
				line += fmt.Sprintf("; the dispatcher's decision %.1f ms per Workload (%.0f decisions), a PlacementReport %.1f ms", 1000*decisions/decided, decided, 1000*reports/asked)
			}
			summary.printf("Kueue dispatch", "%s", line)
		})
	}
}

func shortName(mode string) string {
	switch mode {
	case "AllAtOnce":
		return "aao"
	case "Incremental":
		return "inc"
	case "dispatcher/burst-100":
		return "burst"
	}
	return "d"
}

// mixedJobs is the scenario's batch (framework.MixedJobs) by prefix.
func mixedJobs(f *framework.KueueFleet) func(string) []*batchv1.Job {
	return func(prefix string) []*batchv1.Job {
		jobs, _ := framework.MixedJobs(f.Namespace, prefix)
		return jobs
	}
}

// countUnbound waits for the batch's pods to be created and scheduled
// (10 s) and counts those no node took.
func countUnbound(ctx context.Context, b *testing.B, f *framework.KueueFleet) int {
	time.Sleep(10 * time.Second)
	unbound, err := f.UnboundPods(ctx)
	must(b, err)
	return len(unbound)
}
