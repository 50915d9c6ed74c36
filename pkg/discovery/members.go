package discovery

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/example/platform-apiserver/pkg/registry/store"
)

// membersParams configure the member set.
type membersParams struct {
	Hosting     *Member
	Dir         string
	DirInterval time.Duration
	// RemovalGrace is how long a member must stay absent from Dir (or, at
	// start, from the configuration) before its worker stops and its rows
	// are deleted: a Secret briefly missing or remounted empty removes
	// nothing.
	RemovalGrace time.Duration
	Tuning       Tuning
	Store        store.Writer
}

// members runs one worker per member cluster: the hosting cluster, and one
// per kubeconfig file in Dir, re-read every DirInterval. A file that
// disappears for RemovalGrace stops its worker and deletes the member's
// rows; a file that changes restarts its worker.
type members struct {
	membersParams

	mu      sync.Mutex
	running map[string]*runningWorker
	// rejected remembers files already logged as unusable, by name and content.
	rejected map[string]string
	// absent holds members no longer configured, since when they were
	// first seen missing; they are removed once RemovalGrace has passed.
	absent map[string]time.Time
}

type runningWorker struct {
	worker      *worker
	fingerprint string
	cancel      context.CancelFunc
	done        chan struct{}
}

func newMembers(p membersParams) *members {
	return &members{membersParams: p, running: map[string]*runningWorker{}, rejected: map[string]string{}, absent: map[string]time.Time{}}
}

// run runs the workers until ctx ends, then stops them all.
func (m *members) run(ctx context.Context) {
	defer m.stopAll()
	if m.Hosting != nil {
		m.start(ctx, *m.Hosting, "")
	}
	staleFound := false
	for {
		// Without a directory the hosting cluster is the only member.
		found, ok := map[string]memberFile(nil), true
		if m.Dir != "" {
			found, ok = m.scan(ctx)
		}
		if ok && !staleFound {
			staleFound = m.findStale(ctx, found)
		}
		m.removeAbsent(ctx)
		if m.Dir == "" && staleFound && len(m.absent) == 0 {
			<-ctx.Done()
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-m.Tuning.Clock.After(m.DirInterval):
		}
	}
}

// memberFile is a kubeconfig found in Dir; config is nil when it cannot be used.
type memberFile struct {
	config      *rest.Config
	fingerprint string
}

// scan reconciles the running workers with Dir and returns what it found;
// ok is false when the directory could not be read.
func (m *members) scan(ctx context.Context) (found map[string]memberFile, ok bool) {
	logger := klog.FromContext(ctx).WithValues("dir", m.Dir)
	found, err := m.readDir(logger)
	if err != nil {
		// Never treat an unreadable directory as "every member removed".
		logger.Error(err, "Cannot read the member kubeconfig directory; keeping the current members")
		return nil, false
	}
	for id, f := range found {
		if _, ok := m.absent[id]; ok {
			logger.Info("Member cluster configured again within the removal grace period; keeping it", "cluster", id)
			delete(m.absent, id)
		}
		if f.config == nil {
			continue // unusable now: keep whatever runs
		}
		m.mu.Lock()
		rw := m.running[id]
		m.mu.Unlock()
		if rw != nil && rw.fingerprint == f.fingerprint {
			continue
		}
		if rw != nil {
			logger.Info("Member kubeconfig changed; restarting its worker", "cluster", id)
			m.stop(id)
		} else {
			logger.Info("Member cluster added", "cluster", id)
		}
		m.start(ctx, Member{ID: id, Config: f.config}, f.fingerprint)
	}
	m.mu.Lock()
	var missing []string
	for id := range m.running {
		if _, ok := found[id]; !ok && (m.Hosting == nil || id != m.Hosting.ID) {
			missing = append(missing, id)
		}
	}
	m.mu.Unlock()
	for _, id := range missing {
		m.markAbsent(logger, id, "its kubeconfig file is gone")
	}
	return found, true
}

// findStale marks the clusters the registry holds but that are no longer
// configured (the hosting cluster and the files found, usable or not) as
// absent: a member removed while discovery was not running. It reports
// whether the registry could be asked.
func (m *members) findStale(ctx context.Context, found map[string]memberFile) bool {
	logger := klog.FromContext(ctx)
	ids, err := m.Store.Clusters(ctx)
	if err != nil {
		logger.Error(err, "Cannot list the registry's clusters to remove members no longer configured; retrying")
		return false
	}
	for _, id := range ids {
		_, inDir := found[id]
		if inDir || (m.Hosting != nil && id == m.Hosting.ID) {
			continue
		}
		m.markAbsent(logger, id, "the registry has rows of it but it is not configured")
	}
	return true
}

// markAbsent starts the removal grace period of a member, once.
func (m *members) markAbsent(logger klog.Logger, id, why string) {
	if _, ok := m.absent[id]; ok {
		return
	}
	m.absent[id] = m.Tuning.Clock.Now()
	logger.Info("Member cluster no longer configured; its worker and rows stay for the removal grace period",
		"cluster", id, "why", why, "grace", m.RemovalGrace)
}

// removeAbsent stops the workers and deletes the rows of members absent for
// longer than the grace period.
func (m *members) removeAbsent(ctx context.Context) {
	logger := klog.FromContext(ctx)
	now := m.Tuning.Clock.Now()
	for id, since := range m.absent {
		if now.Sub(since) < m.RemovalGrace {
			continue
		}
		logger.Info("Member cluster removed; stopping its worker and deleting its rows", "cluster", id, "absentFor", now.Sub(since).Round(time.Second))
		m.stop(id)
		m.deleteCluster(ctx, id)
		delete(m.absent, id)
	}
}

// readDir returns the members the directory names. Hidden entries (a mounted
// Secret's ..data links) are skipped; files that are not usable kubeconfigs
// are returned with a nil config and logged once per content.
func (m *members) readDir(logger klog.Logger) (map[string]memberFile, error) {
	entries, err := os.ReadDir(m.Dir)
	if err != nil {
		return nil, err
	}
	found := map[string]memberFile{}
	for _, e := range entries {
		id := e.Name()
		if strings.HasPrefix(id, ".") {
			continue
		}
		path := filepath.Join(m.Dir, id)
		if st, err := os.Stat(path); err != nil || !st.Mode().IsRegular() {
			continue
		}
		data, err := os.ReadFile(path)
		if err != nil {
			m.reject(logger, id, "", err)
			found[id] = memberFile{}
			continue
		}
		sum := sha256.Sum256(data)
		fp := hex.EncodeToString(sum[:])
		if msgs := validation.IsDNS1123Label(id); len(msgs) > 0 {
			m.reject(logger, id, fp, fmt.Errorf("file name is not a cluster id (a DNS label): %s", strings.Join(msgs, "; ")))
			continue
		}
		if m.Hosting != nil && id == m.Hosting.ID {
			m.reject(logger, id, fp, fmt.Errorf("cluster id %q is the hosting cluster's (--cluster-id)", id))
			continue
		}
		cfg, err := clientcmd.BuildConfigFromFlags("", path)
		if err != nil {
			m.reject(logger, id, fp, err)
			found[id] = memberFile{}
			continue
		}
		found[id] = memberFile{config: cfg, fingerprint: fp}
	}
	return found, nil
}

func (m *members) reject(logger klog.Logger, name, fingerprint string, err error) {
	if seen, ok := m.rejected[name]; ok && seen == fingerprint {
		return
	}
	m.rejected[name] = fingerprint
	logger.Error(err, "Ignoring member kubeconfig file", "file", name)
}

func (m *members) start(ctx context.Context, mem Member, fingerprint string) {
	w, err := newWorker(workerParams{ClusterID: mem.ID, Config: mem.Config, Tuning: m.Tuning, Store: m.Store})
	if err != nil {
		klog.FromContext(ctx).Error(err, "Cannot start member worker", "cluster", mem.ID)
		return
	}
	wctx, cancel := context.WithCancel(ctx)
	rw := &runningWorker{worker: w, fingerprint: fingerprint, cancel: cancel, done: make(chan struct{})}
	m.mu.Lock()
	m.running[mem.ID] = rw
	m.mu.Unlock()
	go func() {
		defer close(rw.done)
		w.run(wctx)
	}()
}

// stop ends a member's worker and waits for it, so nothing it had in flight
// commits after stop returns.
func (m *members) stop(id string) {
	m.mu.Lock()
	rw := m.running[id]
	delete(m.running, id)
	m.mu.Unlock()
	if rw != nil {
		rw.cancel()
		<-rw.done
	}
}

func (m *members) stopAll() {
	m.mu.Lock()
	ids := make([]string, 0, len(m.running))
	for id := range m.running {
		ids = append(ids, id)
	}
	m.mu.Unlock()
	for _, id := range ids {
		m.stop(id)
	}
}

// deleteCluster removes a removed member's rows, retrying until it succeeds or ctx ends.
func (m *members) deleteCluster(ctx context.Context, id string) {
	logger := klog.FromContext(ctx).WithValues("cluster", id)
	backoff := m.Tuning.Backoff
	for {
		err := m.Store.DeleteCluster(ctx, id)
		if err == nil {
			logger.Info("Deleted the rows of a removed member cluster")
			forgetCluster(id)
			return
		}
		if ctx.Err() != nil {
			return
		}
		errorsTotal.WithLabelValues(id, "", errorReason(storeError{err})).Inc()
		logger.Error(err, "Deleting the rows of a removed member cluster failed; retrying with backoff")
		select {
		case <-ctx.Done():
			return
		case <-m.Tuning.Clock.After(backoff.Step()):
		}
	}
}

// workers returns the running workers.
func (m *members) workers() []*worker {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]*worker, 0, len(m.running))
	for _, rw := range m.running {
		out = append(out, rw.worker)
	}
	return out
}
