package discovery

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	metricsclient "k8s.io/metrics/pkg/client/clientset/versioned"

	"github.com/example/platform-apiserver/pkg/registry/store"
)

// worker mirrors one member cluster: one syncer per resource.
type worker struct {
	clusterID string
	owner     string
	client    kubernetes.Interface
	store     *memberStore
	cfg       *Config
	syncers   []*syncer
	scraper   *scraper

	mu sync.Mutex
	// unreachable: the member's identity could not be read (the syncers
	// wait for it).
	unreachable bool
	// stop ends the current run; the member store calls it when fenced.
	stop context.CancelCauseFunc
}

// preferProtobuf asks a member for protobuf, as kube-controller-manager and
// kube-scheduler do for built-in types: the lists and watch streams that
// fill the registry cost both the member's API server and this replica
// several times less CPU to encode and decode than JSON. A server that does
// not serve protobuf for a type (a CRD, an aggregated API without it)
// answers JSON, which the client decodes by the answer's Content-Type.
func preferProtobuf(rc *rest.Config) {
	if rc.AcceptContentTypes == "" {
		rc.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	}
	if rc.ContentType == "" {
		rc.ContentType = runtime.ContentTypeProtobuf
	}
}

func newWorker(mem Member, cfg *Config, owner string, relists *relistSlots) (*worker, error) {
	rc := rest.CopyConfig(mem.Config)
	rc.UserAgent = "platform-apiserver-discovery"
	if rc.QPS == 0 {
		rc.QPS, rc.Burst = 20, 40
	}
	preferProtobuf(rc)
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("member cluster %s: client: %w", mem.ID, err)
	}
	metrics, err := metricsclient.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("member cluster %s: metrics client: %w", mem.ID, err)
	}
	w := &worker{clusterID: mem.ID, owner: owner, client: client, cfg: cfg}
	w.store = newMemberStore(cfg.Store, mem.ID, w.onLost)
	w.scraper = newScraper(scraperParams{
		ClusterID:  mem.ID,
		Client:     metrics,
		Store:      w.store,
		Metrics:    cfg.Metrics,
		FirstDelay: time.Duration(rand.Int64N(int64(cfg.Metrics.Interval))),
		Clock:      cfg.Clock,
	})
	settled := map[store.Resource]*firstSync{}
	for _, r := range memberResources {
		settled[r.name] = newFirstSync()
	}
	for i, r := range memberResources {
		var awaits []*firstSync
		for _, a := range r.after {
			awaits = append(awaits, settled[a])
		}
		w.syncers = append(w.syncers, newSyncer(syncerParams{
			Cluster:  mem.ID,
			Resource: &memberResources[i],
			Client:   client,
			Store:    w.store,
			Sync:     cfg.Sync,
			Clock:    cfg.Clock,
			Settled:  settled[r.name],
			Awaits:   awaits,
			Relists:  relists,
		}))
	}
	return w, nil
}

// run mirrors the member until ctx ends or another replica claims it; it
// reports whether the latter happened (fenced). When the registry fails
// over (a write answers store.ErrRewound) it claims the member again and
// resumes from the cursors the registry kept, so what the failover lost is
// mirrored again.
func (w *worker) run(ctx context.Context) (fenced bool) {
	logger := klog.FromContext(ctx).WithValues("cluster", w.clusterID)
	ctx = klog.NewContext(ctx, logger)
	for {
		claimCtx, stop := context.WithCancelCause(ctx)
		w.mu.Lock()
		w.stop = stop
		w.mu.Unlock()
		w.mirror(claimCtx)
		cause := context.Cause(claimCtx)
		stop(nil)
		switch {
		case errors.Is(cause, store.ErrFenced):
			return true
		case errors.Is(cause, store.ErrRewound) && ctx.Err() == nil:
			rewinds.WithLabelValues(w.clusterID).Inc()
			logger.Info("The registry database failed over since this replica claimed the member, and may have lost its last writes; claiming it again and resuming from the cursors the registry kept",
				"err", cause.Error())
			continue
		}
		return false
	}
}

// mirror claims the member in the registry, which fences out every
// earlier writer, makes sure the member is the cluster its cursors came
// from, and mirrors it until ctx ends; it starts over (cursors dropped,
// every resource relisted) when the member's identity changes meanwhile.
func (w *worker) mirror(ctx context.Context) {
	logger := klog.FromContext(ctx)
	if !w.claim(ctx) {
		return
	}
	logger.Info("Starting discovery of member cluster", "epoch", w.store.current().Epoch)
	defer logger.Info("Stopped discovery of member cluster")
	defer w.startReporting(ctx)()
	for {
		identity, ok := w.checkIdentity(ctx)
		if !ok {
			return
		}
		runCtx, cancel := context.WithCancel(ctx)
		var wg sync.WaitGroup
		for _, s := range w.syncers {
			wg.Go(func() { s.run(runCtx) })
		}
		wg.Go(func() { w.scraper.run(runCtx) })
		changed := w.watchIdentity(runCtx, identity)
		cancel()
		wg.Wait()
		if !changed {
			return
		}
	}
}

// onLost stops the current claim's run: another replica claimed the member
// (store.ErrFenced), or the registry failed over (store.ErrRewound).
func (w *worker) onLost(err error) {
	if errors.Is(err, store.ErrFenced) {
		klog.Background().Info("Another replica claimed this member cluster (or it was removed); this replica stops mirroring it",
			"cluster", w.clusterID, "err", err.Error())
	}
	w.mu.Lock()
	stop := w.stop
	w.mu.Unlock()
	if stop != nil {
		stop(err)
	}
}

// claim claims the member for this replica, retrying while the registry
// is unavailable; ok is false when ctx ended first.
func (w *worker) claim(ctx context.Context) (ok bool) {
	backoff := w.cfg.Sync.Backoff
	for {
		_, err := w.store.claim(ctx, w.owner)
		if err == nil {
			claims.WithLabelValues(w.clusterID).Inc()
			return true
		}
		switch {
		case ctx.Err() != nil:
			return false
		case errors.Is(err, store.ErrMemberRemoved):
			// A view that still lists the member although every other
			// replica's dropped it: only a configuration listing it anew
			// brings it back.
			klog.FromContext(ctx).Info("The registry removed this member cluster (no configuration listed it for the removal grace period); not mirroring it until a configuration lists it anew; retrying with backoff")
		default:
			errorsTotal.WithLabelValues(w.clusterID, "", errorReason(storeError{err})).Inc()
			klog.FromContext(ctx).Error(err, "Cannot claim the member cluster in the registry; retrying with backoff")
		}
		select {
		case <-ctx.Done():
			return false
		case <-w.cfg.Clock.After(backoff.Step()):
		}
	}
}

// memberIdentity is what identifies a member cluster across restarts of its
// API server: the uid of its kube-system namespace, which a rebuilt cluster
// or a fresh etcd does not keep.
func (w *worker) memberIdentity(ctx context.Context) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, w.cfg.Sync.ApplyTimeout)
	defer cancel()
	ns, err := w.client.CoreV1().Namespaces().Get(ctx, metav1.NamespaceSystem, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("read the member's identity (namespace %s): %w", metav1.NamespaceSystem, err)
	}
	return string(ns.UID), nil
}

// checkIdentity reads the member's identity and records it; a different
// one drops the persisted cursors, so every resource relists and reconciles
// instead of resuming from versions another cluster issued. It retries with
// backoff until it can tell; ok is false when ctx ended first.
func (w *worker) checkIdentity(ctx context.Context) (identity string, ok bool) {
	logger := klog.FromContext(ctx)
	backoff := w.cfg.Sync.Backoff
	for {
		identity, err := w.memberIdentity(ctx)
		var changed bool
		if err == nil {
			changed, err = w.store.CheckMemberIdentity(ctx, identity)
			if err != nil {
				err = storeError{err}
			}
		}
		w.mu.Lock()
		w.unreachable = err != nil && !errors.As(err, new(storeError))
		w.mu.Unlock()
		if err == nil {
			if changed {
				logger.Info("Member cluster is not the one its cursors came from (kube-system uid changed: etcd replaced or cluster rebuilt under this id); relisting every resource",
					"identity", identity)
				identityChanges.WithLabelValues(w.clusterID).Inc()
			}
			return identity, true
		}
		if ctx.Err() != nil {
			return "", false
		}
		errorsTotal.WithLabelValues(w.clusterID, "", errorReason(err)).Inc()
		logger.Error(err, "Cannot check the member cluster's identity; retrying with backoff", "reason", errorReason(err))
		select {
		case <-ctx.Done():
			return "", false
		case <-w.cfg.Clock.After(backoff.Step()):
		}
	}
}

// watchIdentity checks the member's identity every IdentityInterval until
// ctx ends; it reports whether it changed. Failures to read it are left to
// the syncers, which see the same member.
func (w *worker) watchIdentity(ctx context.Context, identity string) bool {
	for {
		select {
		case <-ctx.Done():
			return false
		case <-w.cfg.Clock.After(w.cfg.Sync.IdentityInterval):
		}
		now, err := w.memberIdentity(ctx)
		if err == nil && now != identity {
			return true
		}
	}
}

// state sums up the worker's resources: lagging if any cannot commit,
// unreachable if any cannot reach the member, synced once all are, else
// syncing.
func (w *worker) state() store.MemberState {
	w.mu.Lock()
	unreachable := w.unreachable
	w.mu.Unlock()
	for _, s := range w.syncers {
		st := s.status()
		if st.stuck {
			return store.MemberLagging
		}
		unreachable = unreachable || st.unreachable
	}
	switch {
	case unreachable:
		return store.MemberUnreachable
	case w.synced():
		return store.MemberSynced
	default:
		return store.MemberSyncing
	}
}

// synced reports whether every resource finished its first list or resumed
// its watch, or (an optional one) was recorded as not served by the member.
func (w *worker) synced() bool {
	for _, s := range w.syncers {
		if !s.status().synced {
			return false
		}
	}
	return true
}

// wedged returns an error naming a resource that has had events pending
// without any sign of life (no event, no commit attempt) for longer than timeout.
func (w *worker) wedged(now time.Time, timeout time.Duration) error {
	for _, s := range w.syncers {
		st := s.status()
		if st.pending > 0 && now.Sub(st.lastBeat) > timeout {
			return fmt.Errorf("cluster %s, %s: %d events pending and no progress for %s",
				w.clusterID, s.resource(), st.pending, now.Sub(st.lastBeat).Round(time.Second))
		}
	}
	return nil
}
