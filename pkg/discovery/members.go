package discovery

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/rest"
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
	// AllowFilesAndPlugins lets member kubeconfigs run exec and
	// auth-provider plugins and read files (kubeconfig.go).
	AllowFilesAndPlugins bool
	// Owner names this replica in its claims of members.
	Owner string
	// Shared: members run only while this replica holds them (Own and
	// Disown, called by the shard manager); else every configured member
	// runs, and one another replica claims stays stopped.
	Shared bool
	// Lost is told about a member whose worker stopped because another
	// writer claimed it (shared mode), so its Lease is given up.
	Lost func(id string)
}

// members runs one worker per member cluster this replica mirrors, among
// the configured ones: the hosting cluster, and one per kubeconfig file in
// Dir, re-read every DirInterval. A file that disappears for RemovalGrace
// stops its worker and deletes the member's rows; a file that changes
// restarts its worker.
type members struct {
	membersParams

	// ctx is run's context, which workers run under: reconcile starts them
	// from Own and Disown too, which the shard manager calls with no
	// context of run's lifetime.
	ctx context.Context //nolint:containedctx // see above; set by run

	// reconciling serializes reconcile.
	reconciling sync.Mutex

	mu sync.Mutex
	// configs are the configured members' last usable configurations.
	configs map[string]memberFile
	// owned are the members this replica holds (shared mode).
	owned map[string]bool
	// fenced are members whose worker stopped because another writer
	// claimed them, with the fingerprint they ran with (unshared mode: not
	// restarted until their configuration changes).
	fenced  map[string]string
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
	m := &members{membersParams: p, ctx: context.Background(), configs: map[string]memberFile{}, owned: map[string]bool{}, fenced: map[string]string{},
		running: map[string]*runningWorker{}, rejected: map[string]string{}, absent: map[string]time.Time{}}
	if p.Hosting != nil {
		m.configs[p.Hosting.ID] = memberFile{config: p.Hosting.Config}
	}
	return m
}

// Members returns the ids of the configured members, for the shard manager.
func (m *members) Members() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	ids := make([]string, 0, len(m.configs))
	for id := range m.configs {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// Own starts mirroring a member this replica now holds.
func (m *members) Own(id string) {
	m.mu.Lock()
	m.owned[id] = true
	m.mu.Unlock()
	m.reconcile()
}

// Disown stops mirroring a member and returns once its worker stopped.
func (m *members) Disown(id string) {
	m.mu.Lock()
	delete(m.owned, id)
	m.mu.Unlock()
	m.reconcile()
}

// run runs the workers until ctx ends, then stops them all.
func (m *members) run(ctx context.Context) {
	m.mu.Lock()
	m.ctx = ctx
	m.mu.Unlock()
	defer m.stopAll()
	m.reconcile()
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

// scan reads Dir into the configured members, reconciles the workers with
// it and returns what it found; ok is false when the directory could not
// be read.
func (m *members) scan(ctx context.Context) (found map[string]memberFile, ok bool) {
	logger := klog.FromContext(ctx).WithValues("dir", m.Dir)
	found, err := m.readDir(logger)
	if err != nil {
		// Never treat an unreadable directory as "every member removed".
		logger.Error(err, "Cannot read the member kubeconfig directory; keeping the current members")
		return nil, false
	}
	m.mu.Lock()
	for id, f := range found {
		if _, ok := m.absent[id]; ok {
			logger.Info("Member cluster configured again within the removal grace period; keeping it", "cluster", id)
			delete(m.absent, id)
		}
		if f.config == nil {
			continue // unusable now: keep whatever config runs
		}
		switch cur, ok := m.configs[id]; {
		case !ok:
			logger.Info("Member cluster added", "cluster", id)
		case cur.fingerprint != f.fingerprint:
			logger.Info("Member kubeconfig changed; restarting its worker", "cluster", id)
		}
		m.configs[id] = f
	}
	var missing []string
	for id := range m.configs {
		if _, ok := found[id]; !ok && (m.Hosting == nil || id != m.Hosting.ID) {
			missing = append(missing, id)
		}
	}
	m.mu.Unlock()
	for _, id := range missing {
		m.markAbsent(logger, id, "its kubeconfig file is gone")
	}
	m.reconcile()
	return found, true
}

// reconcile runs a worker for every configured member this replica
// mirrors, with its current configuration, and stops the others; it
// returns once the stopped ones have.
func (m *members) reconcile() {
	m.reconciling.Lock()
	defer m.reconciling.Unlock()
	m.mu.Lock()
	want := map[string]memberFile{}
	for id, f := range m.configs {
		if fp, ok := m.fenced[id]; ok && fp == f.fingerprint {
			continue
		}
		delete(m.fenced, id)
		if !m.Shared || m.owned[id] {
			want[id] = f
		}
	}
	var stop, start []string
	for id, rw := range m.running {
		if f, ok := want[id]; !ok || f.fingerprint != rw.fingerprint {
			stop = append(stop, id)
		}
	}
	for id := range want {
		if rw, ok := m.running[id]; !ok || rw.fingerprint != want[id].fingerprint || slices.Contains(stop, id) {
			start = append(start, id)
		}
	}
	ctx := m.ctx
	m.mu.Unlock()
	for _, id := range stop {
		m.stop(id)
	}
	if ctx.Err() != nil {
		return
	}
	for _, id := range start {
		m.start(ctx, Member{ID: id, Config: want[id].config}, want[id].fingerprint)
	}
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
	m.mu.Lock()
	defer m.mu.Unlock()
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
	m.mu.Lock()
	removed := map[string]time.Duration{}
	for id, since := range m.absent {
		if now.Sub(since) >= m.RemovalGrace {
			removed[id] = now.Sub(since)
			delete(m.absent, id)
			delete(m.configs, id)
		}
	}
	m.mu.Unlock()
	if len(removed) == 0 {
		return
	}
	m.reconcile()
	for id, absentFor := range removed {
		logger.Info("Member cluster removed; stopped its worker, deleting its rows", "cluster", id, "absentFor", absentFor.Round(time.Second))
		m.deleteCluster(ctx, id)
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
		cfg, refused, err := memberRESTConfig(path, data, m.AllowFilesAndPlugins)
		if len(refused) > 0 {
			m.refuse(logger, id, fp, refused, err)
			found[id] = memberFile{}
			continue
		}
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
	kubeconfigsRefused.WithLabelValues("invalid").Inc()
}

// refuse logs and counts, once per content, a member kubeconfig that would
// run a plugin or read a file. Like an unusable file, it is not mirrored;
// a member already running keeps the configuration it was accepted with.
func (m *members) refuse(logger klog.Logger, id, fingerprint string, refused []refusedField, err error) {
	if seen, ok := m.rejected[id]; ok && seen == fingerprint {
		return
	}
	m.rejected[id] = fingerprint
	fields := make([]string, len(refused))
	for i, r := range refused {
		fields[i] = r.Field
	}
	logger.Error(err, "Refusing member kubeconfig: it would run a command or read a file of this server; not mirroring it",
		"cluster", id, "fields", fields, "allowWith", AllowFilesAndPluginsFlag)
	kubeconfigsRefused.WithLabelValues(refused[0].Reason).Inc()
}

func (m *members) start(ctx context.Context, mem Member, fingerprint string) {
	w, err := newWorker(workerParams{ClusterID: mem.ID, Config: mem.Config, Tuning: m.Tuning, Store: m.Store, Owner: m.Owner})
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
		if w.run(wctx) {
			m.lost(mem.ID, rw)
		}
	}()
}

// lost records that a member's worker stopped because another writer
// claimed the member: it is not restarted by this replica unless it holds
// the member again (shared) or its configuration changes (unshared).
func (m *members) lost(id string, rw *runningWorker) {
	m.mu.Lock()
	if m.running[id] == rw {
		delete(m.running, id)
	}
	if m.Shared {
		delete(m.owned, id)
	} else {
		m.fenced[id] = rw.fingerprint
		klog.Background().Error(nil, "Another writer claimed this member cluster; this replica stops mirroring it. Run every replica with --leader-elect so they share members instead",
			"cluster", id)
	}
	m.mu.Unlock()
	if m.Shared && m.Lost != nil {
		m.Lost(id)
	}
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
