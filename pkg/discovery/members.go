package discovery

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
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

// members runs one worker per member cluster this replica mirrors, among
// the configured ones: the hosting cluster, and one per kubeconfig file in
// Members.Dir, re-read every Members.DirInterval. Each read is reported to
// the registry, which decides removals for every replica at once; a file
// that changes restarts its worker.
type members struct {
	cfg *Config
	// owner names this replica in its claims of members.
	owner string
	// relists bounds the relists of all its workers (Sync.MaxRelists).
	relists *relistSlots
	// Lost is told about a member whose worker stopped because another
	// writer claimed it (shared mode), so its Lease is given up.
	Lost func(id string)

	// ctx is run's context, which workers run under: reconcile starts them
	// from Own and Disown too, which the shard manager calls with no
	// context of run's lifetime.
	ctx context.Context //nolint:containedctx // see above; set by run

	// reconciling serializes reconcile.
	reconciling sync.Mutex

	mu sync.Mutex
	// configs are the known members' last usable configurations: those
	// configured, and those no longer configured until the registry
	// removes them (they keep being mirrored meanwhile).
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

	// Used by run's rounds only.
	//
	// listed are the members the last read listed, to tell those listed anew.
	listed map[string]bool
	// unreported are members listed anew that the registry has not been
	// told of yet (a report failed).
	unreported map[string]bool
	// stale are members the registry held at start, but the hosting
	// cluster, not listed since; nil until the registry could be asked.
	stale map[string]bool
	// absent are the members the registry last said no configuration lists.
	absent map[string]time.Time
	// unknown is why the last read could not tell the members ("" if it could).
	unknown string
}

type runningWorker struct {
	worker      *worker
	fingerprint string
	cancel      context.CancelFunc
	done        chan struct{}
}

func newMembers(cfg *Config, owner string) *members {
	m := &members{cfg: cfg, owner: owner, relists: newRelistSlots(cfg.Sync.MaxRelists, cfg.Clock), ctx: context.Background(), configs: map[string]memberFile{}, owned: map[string]bool{}, fenced: map[string]string{},
		running: map[string]*runningWorker{}, rejected: map[string]string{}, listed: map[string]bool{}, unreported: map[string]bool{}}
	if cfg.Hosting != nil {
		m.configs[cfg.Hosting.ID] = memberFile{config: cfg.Hosting.Config}
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
	for {
		m.round(ctx)
		select {
		case <-ctx.Done():
			return
		case <-m.cfg.Clock.After(m.cfg.Members.DirInterval):
		}
	}
}

// round reads the configuration, reports it to the registry, which
// decides removals, and runs the workers of what is known: reported first,
// so a member listed anew is no longer removed when its worker claims it.
// A read that cannot tell the members changes none.
func (m *members) round(ctx context.Context) {
	defer m.reconcile()
	logger := klog.FromContext(ctx)
	if m.stale == nil {
		m.stale = m.findStale(ctx)
	}
	found, ok := m.readConfig(logger)
	if !ok {
		return
	}
	m.report(ctx, found)
	m.configure(logger, found)
}

// memberFile is a kubeconfig found in Dir; config is nil when it cannot be used.
type memberFile struct {
	config      *rest.Config
	fingerprint string
}

// readConfig returns the members Dir names, usable or not (none without
// a directory); ok is false when the read cannot tell the members: the
// directory is unreadable, or names no member while there are members to
// lose (a kubelet shows a missing optional Secret and an emptied one alike,
// as an empty directory).
func (m *members) readConfig(logger klog.Logger) (found map[string]memberFile, ok bool) {
	if m.cfg.Members.Dir == "" {
		return map[string]memberFile{}, true
	}
	logger = logger.WithValues("dir", m.cfg.Members.Dir)
	found, err := m.readDir(logger)
	switch {
	case err != nil:
		m.cannotTell(logger, fmt.Errorf("cannot read the member kubeconfig directory: %w", err))
		return nil, false
	case len(found) == 0 && m.atStake():
		m.cannotTell(logger, errors.New("the member kubeconfig directory names no member: the members Secret is missing or emptied"))
		return nil, false
	}
	if m.unknown != "" {
		logger.Info("The member kubeconfig directory names members again; reconciling them")
		m.unknown = ""
		membersUnknown.Set(0)
	}
	return found, true
}

// atStake reports whether there may be members besides the hosting
// cluster: known ones, or the registry could not be asked yet.
func (m *members) atStake() bool {
	if m.stale == nil || len(m.stale) > 0 {
		return true
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for id := range m.configs {
		if !m.isHosting(id) {
			return true
		}
	}
	return false
}

// cannotTell keeps every member as it is while the configuration cannot
// tell them; it logs when the reason changes.
func (m *members) cannotTell(logger klog.Logger, err error) {
	membersUnknown.Set(1)
	if m.unknown == err.Error() {
		return
	}
	m.unknown = err.Error()
	logger.Error(err, "Cannot tell the configured members; keeping every member as it is and removing none until the directory names members again")
}

// shared: members run only while this replica holds them (Own and Disown,
// called by the shard manager); else every configured member runs, and one
// another replica claims stays stopped.
func (m *members) shared() bool { return m.cfg.LeaderElection.LeaderElect }

func (m *members) isHosting(id string) bool { return m.cfg.Hosting != nil && id == m.cfg.Hosting.ID }

// report tells the registry what this read lists and follows its answer.
// Members listed anew are told until a report succeeds: only they bring
// back a removed member, so a replica whose view still lists a member
// every other one dropped cannot undo its removal.
func (m *members) report(ctx context.Context, found map[string]memberFile) {
	logger := klog.FromContext(ctx)
	listed := map[string]bool{}
	if m.cfg.Hosting != nil {
		listed[m.cfg.Hosting.ID] = true
	}
	for id := range found {
		listed[id] = true
	}
	for id := range listed {
		if !m.listed[id] {
			m.unreported[id] = true
		}
	}
	for id := range m.unreported {
		if !listed[id] {
			delete(m.unreported, id)
		}
	}
	m.listed = listed
	unconfigured := map[string]bool{}
	maps.Copy(unconfigured, m.stale)
	m.mu.Lock()
	for id := range m.configs {
		unconfigured[id] = true
	}
	m.mu.Unlock()
	maps.DeleteFunc(unconfigured, func(id string, _ bool) bool { return listed[id] })
	v := store.MembersView{Configured: slices.Sorted(maps.Keys(listed)), Listed: slices.Sorted(maps.Keys(m.unreported)),
		Unconfigured: slices.Sorted(maps.Keys(unconfigured)), Grace: m.cfg.Members.RemovalGrace}
	res, err := m.cfg.Store.ReconcileMembers(ctx, v)
	if err != nil {
		errorsTotal.WithLabelValues("", "", errorReason(storeError{err})).Inc()
		logger.Error(err, "Cannot report the configured members to the registry; retrying at the next read")
		return
	}
	clear(m.unreported)
	maps.DeleteFunc(m.stale, func(id string, _ bool) bool { return listed[id] })
	m.follow(logger, res, listed)
}

// follow logs what the registry says of the members this replica no
// longer lists and stops those it removed.
func (m *members) follow(logger klog.Logger, res store.MembersReconciled, listed map[string]bool) {
	for id, since := range res.Absent {
		if _, ok := m.absent[id]; !ok {
			logger.Info("Member cluster no longer configured; it stays, mirrored, until no configuration has listed it for the removal grace period",
				"cluster", id, "absentSince", since, "grace", m.cfg.Members.RemovalGrace)
		}
	}
	for id := range m.absent {
		if listed[id] {
			logger.Info("Member cluster configured again within the removal grace period; keeping it", "cluster", id)
		}
	}
	m.absent = res.Absent
	membersAbsent.Set(float64(len(res.Absent)))
	for _, id := range res.RemovedNow {
		memberRemovals.Inc()
		logger.Info("Removed a member cluster from the registry: no configuration listed it for the removal grace period; its objects are deleted, its usage history stays for --metrics-retention",
			"cluster", id, "grace", m.cfg.Members.RemovalGrace)
	}
	m.mu.Lock()
	for _, id := range res.Removed {
		delete(m.configs, id)
		delete(m.stale, id)
	}
	m.mu.Unlock()
	for _, id := range res.Removed {
		logger.Info("Member cluster removed from the registry; stopping its worker", "cluster", id)
		forgetCluster(id)
	}
}

// configure takes the usable configurations found. A member no longer
// found keeps the one it runs with until the registry removes it; a file
// unusable now keeps whatever configuration runs.
func (m *members) configure(logger klog.Logger, found map[string]memberFile) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for id, f := range found {
		if f.config == nil {
			continue
		}
		switch cur, ok := m.configs[id]; {
		case !ok:
			logger.Info("Member cluster added", "cluster", id)
		case cur.fingerprint != f.fingerprint:
			logger.Info("Member kubeconfig changed; restarting its worker", "cluster", id)
		}
		m.configs[id] = f
	}
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
		if !m.shared() || m.owned[id] {
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

// findStale returns the members the registry holds, but the hosting
// cluster: those no read lists become absent (a member removed while
// discovery was not running). Nil when the registry cannot be asked.
func (m *members) findStale(ctx context.Context) map[string]bool {
	ids, err := m.cfg.Store.Clusters(ctx)
	if err != nil {
		klog.FromContext(ctx).Error(err, "Cannot list the registry's clusters to find members no longer configured; retrying")
		return nil
	}
	stale := map[string]bool{}
	for _, id := range ids {
		if !m.isHosting(id) {
			stale[id] = true
		}
	}
	return stale
}

// readDir returns the members the directory names. Hidden entries (a mounted
// Secret's ..data links) are skipped; files that are not usable kubeconfigs
// are returned with a nil config and logged once per content.
func (m *members) readDir(logger klog.Logger) (map[string]memberFile, error) {
	entries, err := os.ReadDir(m.cfg.Members.Dir)
	if err != nil {
		return nil, err
	}
	found := map[string]memberFile{}
	for _, e := range entries {
		id := e.Name()
		if strings.HasPrefix(id, ".") {
			continue
		}
		path := filepath.Join(m.cfg.Members.Dir, id)
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
		if m.cfg.Hosting != nil && id == m.cfg.Hosting.ID {
			m.reject(logger, id, fp, fmt.Errorf("cluster id %q is the hosting cluster's (--cluster-id)", id))
			continue
		}
		cfg, refused, err := memberRESTConfig(path, data, m.cfg.Members.AllowFilesAndPlugins)
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
	w, err := newWorker(mem, m.cfg, m.owner, m.relists)
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
	if m.shared() {
		delete(m.owned, id)
	} else {
		m.fenced[id] = rw.fingerprint
		klog.Background().Error(nil, "Another writer claimed this member cluster; this replica stops mirroring it. Run every replica with --leader-elect so they share members instead",
			"cluster", id)
	}
	m.mu.Unlock()
	if m.shared() && m.Lost != nil {
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
