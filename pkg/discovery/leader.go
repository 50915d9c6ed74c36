package discovery

import (
	"context"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"
)

// electionParams configure runElected.
type electionParams struct {
	Client   kubernetes.Interface
	Config   LeaderElection
	Identity string
	// Run is called while this replica leads; its context ends when the lead is lost.
	Run func(ctx context.Context)
}

// runElected contends for the Lease until ctx ends and calls Run while it
// leads. After losing the lease it waits for Run to return before it
// contends again, so two runs never overlap in one process. The lease is
// released on shutdown so another replica takes over at once.
func runElected(ctx context.Context, p electionParams) {
	logger := klog.FromContext(ctx).WithValues("lease", klog.KRef(p.Config.Namespace, p.Config.Name), "identity", p.Identity)
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: p.Config.Namespace, Name: p.Config.Name},
		Client:     p.Client.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: p.Identity},
	}
	for ctx.Err() == nil {
		var (
			mu      sync.Mutex
			stopped bool
			running sync.WaitGroup
		)
		elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
			Lock:            lock,
			Name:            p.Config.Name,
			LeaseDuration:   p.Config.LeaseDuration,
			RenewDeadline:   p.Config.RenewDeadline,
			RetryPeriod:     p.Config.RetryPeriod,
			ReleaseOnCancel: true,
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: func(leadCtx context.Context) {
					mu.Lock()
					if stopped {
						mu.Unlock()
						return
					}
					running.Add(1)
					mu.Unlock()
					defer running.Done()
					logger.Info("Became the discovery leader; starting discovery")
					leader.Set(1)
					defer leader.Set(0)
					p.Run(klog.NewContext(leadCtx, logger))
				},
				OnStoppedLeading: func() {},
				OnNewLeader: func(id string) {
					if id != p.Identity {
						logger.Info("Another replica leads discovery; this one serves reads only", "leader", id)
					}
				},
			},
		})
		if err != nil {
			logger.Error(err, "Discovery leader election misconfigured; discovery does not run")
			return
		}
		elector.Run(ctx)
		mu.Lock()
		stopped = true
		mu.Unlock()
		running.Wait()
		if ctx.Err() == nil {
			logger.Info("Lost the discovery lease; discovery stopped, contending again")
		}
	}
}
