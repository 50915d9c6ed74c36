package shard

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	coordinationclient "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
)

// Labels of the Leases a manager keeps.
const (
	// LabelSet names the lease set (Config.Name) a Lease belongs to.
	LabelSet = "platform.example.io/discovery-lease-set"
	// LabelRole is RoleMember or RoleReplica.
	LabelRole = "platform.example.io/discovery-lease-role"
	// LabelCluster is the member a member Lease is for.
	LabelCluster = "platform.example.io/cluster"

	RoleMember  = "member"
	RoleReplica = "replica"
)

// Config configures a Manager.
type Config struct {
	Leases coordinationclient.LeasesGetter
	// Namespace holds the Leases (the server's own).
	Namespace string
	// Name prefixes the Leases: <Name>-member-<cluster id> for members,
	// <Name>-replica-<hash of identity> for replicas.
	Name string
	// Identity names this replica; it must be unique per process run.
	Identity string
	// LeaseDuration is how long a presence Lease that is not renewed
	// stays alive, and with it the member Leases its replica holds; a dead
	// replica's members move after about this long.
	LeaseDuration time.Duration
	// MemberLeaseDuration is the duration a member Lease says (default:
	// 20 lease durations). Its holder renews it every third to two thirds
	// of that (spread by member): it holds only while its holder's
	// presence Lease does, so its own renewals only show that the holder
	// still minds it, and cost one write per member per period.
	MemberLeaseDuration time.Duration
	// RetryPeriod is how often the manager looks at the Leases.
	RetryPeriod time.Duration
	// RoundTimeout bounds the Lease calls of one round, and each presence
	// renewal (default: the lease duration).
	RoundTimeout time.Duration
	Clock        clock.Clock
}

// Target is what the manager shares out: the configured members, and the
// mirroring of the ones this replica holds.
type Target interface {
	// Members returns the ids of the members to share.
	Members() []string
	// Own starts mirroring a member whose Lease this replica now holds.
	Own(id string)
	// Disown stops mirroring a member and returns once nothing of it runs;
	// only then is its Lease given up.
	Disown(id string)
}

// Manager keeps one Lease per member and shares the members among live
// replicas: each replica holds the Leases of the members Assign gives it
// (what it holds, up to its share, stays with it), keeps them through its
// presence Lease (renewed every retry period on its own, see keepPresence;
// a member's own Lease is written rarely, see Config.MemberLeaseDuration),
// takes over those of dead replicas once their presence expires, and hands
// members over (stop, then release) when a replica joins and its share
// must come from others.
//
// Leases coordinate; they do not make writes safe. A replica that cannot
// reach the hosting cluster keeps mirroring what it holds (nobody can take
// it over meanwhile, except a replica that can reach it, whose claim in
// the registry then fences this one's writes), so an unreachable hosting
// cluster stops no member.
type Manager struct {
	cfg    Config
	target Target

	// observed is when each Lease's record (holder, renew time) last
	// changed, on this replica's clock: a Lease is expired when it has not
	// changed for its duration, whatever the holders' clocks say.
	observed map[string]observation
	// held are the members whose Lease this replica holds, by member id.
	held map[string]*coordinationv1.Lease

	mu sync.Mutex
	// lost are held members whose mirroring stopped on its own (see Lost).
	lost map[string]bool
	// presence is this replica's presence Lease as last written (nil
	// until created, or after it was found deleted).
	presence *coordinationv1.Lease
	// joined is when this replica created its presence Lease.
	joined time.Time
	// writingSince is since when every presence renewal worked (zero
	// after a failed one); see mayTakeOver.
	writingSince time.Time
	// roundBegan is when the latest round began; presence is renewed only
	// while rounds go on (see keepPresence).
	roundBegan time.Time
	// lapsing: keepPresence lets presence lapse because rounds stopped.
	lapsing bool
}

type observation struct {
	record string
	at     time.Time
}

// record is what a renewal changes in a Lease.
func record(l *coordinationv1.Lease) string {
	var renewed string
	if l.Spec.RenewTime != nil {
		renewed = l.Spec.RenewTime.UTC().Format(time.RFC3339Nano)
	}
	return holder(l) + "|" + renewed + "|" + fmt.Sprint(ptr.Deref(l.Spec.LeaseTransitions, 0))
}

// New returns a manager of the Leases of cfg for target.
func New(cfg Config, target Target) (*Manager, error) {
	if cfg.Leases == nil || cfg.Namespace == "" || cfg.Name == "" || cfg.Identity == "" || cfg.LeaseDuration <= 0 || cfg.RetryPeriod <= 0 {
		return nil, fmt.Errorf("shard: incomplete configuration %+v", cfg)
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.RoundTimeout <= 0 {
		cfg.RoundTimeout = cfg.LeaseDuration
	}
	if cfg.MemberLeaseDuration <= 0 {
		cfg.MemberLeaseDuration = defaultMemberLeases * cfg.LeaseDuration
	}
	return &Manager{cfg: cfg, target: target, observed: map[string]observation{}, held: map[string]*coordinationv1.Lease{}, lost: map[string]bool{}}, nil
}

// defaultMemberLeases is Config.MemberLeaseDuration in lease durations:
// with the default 15s, a member's Lease is written every 100 to 200 s, so
// 1,000 members cost under ten writes a second.
const defaultMemberLeases = 20

// MemberLeaseName is the name of a member's Lease.
func MemberLeaseName(name, clusterID string) string { return name + "-member-" + clusterID }

// ReplicaLeaseName is the name of a replica's presence Lease.
func ReplicaLeaseName(name, identity string) string {
	sum := sha256.Sum256([]byte(identity))
	return name + "-replica-" + hex.EncodeToString(sum[:6])
}

// Lost tells the manager that a held member stopped mirroring on its own
// (another writer claimed it in the registry); its Lease is given up at the
// next round, so the assignment decides afresh who mirrors it.
func (m *Manager) Lost(id string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.lost[id] = true
}

// Run keeps the Leases until ctx ends: presence on its own (keepPresence)
// and the member Leases in rounds (sync). Then it stops every held member
// and releases its Lease, and deletes this replica's presence Lease, so
// the others take over at once.
func (m *Manager) Run(ctx context.Context) {
	logger := klog.FromContext(ctx).WithValues("leases", m.cfg.Name, "identity", m.cfg.Identity)
	ctx = klog.NewContext(ctx, logger)
	var presence sync.WaitGroup
	presence.Go(func() { m.everyRetryPeriod(ctx, m.keepPresence) })
	m.everyRetryPeriod(ctx, m.sync)
	presence.Wait() // before shutdown deletes presence, so nothing writes it again
	m.shutdown(klog.NewContext(context.WithoutCancel(ctx), logger))
}

// everyRetryPeriod calls f at once and then a retry period (jittered by up
// to 10 %) after each call began, on the manager's clock, until ctx ends.
func (m *Manager) everyRetryPeriod(ctx context.Context, f func(context.Context)) {
	for ctx.Err() == nil {
		next := m.cfg.Clock.Now().Add(wait.Jitter(m.cfg.RetryPeriod, 0.1))
		f(ctx)
		select {
		case <-ctx.Done():
		case <-m.cfg.Clock.After(next.Sub(m.cfg.Clock.Now())):
		}
	}
}

// sync is one round: observe the Leases, decide (a pure function,
// decide.go), then act: acquire, renew or hand over member Leases as the
// assignment says.
func (m *Manager) sync(ctx context.Context) {
	m.beginRound(m.cfg.Clock.Now())
	ctx, cancel := context.WithTimeout(ctx, m.cfg.RoundTimeout)
	defer cancel()
	r, ok := m.observe(ctx)
	if !ok {
		return
	}
	m.act(ctx, decide(r))
}

// observe lists the Leases and notes which changed. It reports false when
// the round should take no step: the Leases could not be listed, or this
// replica has not been present for a retry period.
func (m *Manager) observe(ctx context.Context) (round, bool) {
	list, err := m.cfg.Leases.Leases(m.cfg.Namespace).List(ctx, metav1.ListOptions{LabelSelector: LabelSet + "=" + m.cfg.Name})
	if err != nil {
		// Keep mirroring what is held: nobody else can take it over
		// without the Leases either, and the registry fences if they do.
		klog.FromContext(ctx).Error(err, "Cannot list the discovery Leases; keeping the members this replica mirrors")
		return round{}, false
	}
	now := m.cfg.Clock.Now()
	leases := map[string]*coordinationv1.Lease{}
	for i := range list.Items {
		l := &list.Items[i]
		leases[l.Name] = l
		o, seen := m.observed[l.Name]
		switch {
		case !seen && l.Spec.RenewTime != nil && l.Spec.RenewTime.Time.Before(now):
			// First sight: trust the renew time (clocks agree to well
			// within a lease duration), so a replica that just started sees
			// the dead at once instead of a lease duration later.
			m.observed[l.Name] = observation{record: record(l), at: l.Spec.RenewTime.Time}
		case !seen || o.record != record(l):
			m.observed[l.Name] = observation{record: record(l), at: now}
		}
	}
	for name := range m.observed {
		if _, ok := leases[name]; !ok {
			delete(m.observed, name)
		}
	}
	m.mu.Lock()
	if m.joined.IsZero() || now.Sub(m.joined) < m.cfg.RetryPeriod {
		m.mu.Unlock()
		// Let the other replicas see this one before taking members, so
		// replicas that start together do not all grab everything first.
		return round{}, false
	}
	mayTakeOver := m.mayTakeOver(now)
	lost := m.lost
	m.lost = map[string]bool{}
	m.mu.Unlock()
	held := make(map[string]bool, len(m.held))
	for id := range m.held {
		held[id] = true
	}
	return round{self: m.cfg.Identity, set: m.cfg.Name, now: now, leaseDuration: m.cfg.LeaseDuration, mayTakeOver: mayTakeOver,
		members: m.target.Members(), leases: leases, observed: m.observed, held: held, lost: lost}, true
}

// act takes a round's steps; renewals go out together.
func (m *Manager) act(ctx context.Context, steps []step) {
	logger := klog.FromContext(ctx)
	var due []string // held Leases to renew
	for _, s := range steps {
		switch s.verb {
		case giveUp:
			switch s.reason {
			case reasonLost:
				logger.Info("Mirroring of a held member stopped: another writer claimed it; giving up its Lease", "cluster", s.id)
			case reasonHandedOver:
				logger.Info("Handing a member over to the replica it is assigned to", "cluster", s.id, "to", s.assignee)
			case reasonUnconfigured:
				logger.Info("Member no longer configured; giving up its Lease", "cluster", s.id)
			}
			m.release(ctx, s.id)
		case stop:
			logger.Info("Another replica holds the Lease of a member this replica mirrored; stopping it", "cluster", s.id, "holder", holder(s.lease))
			m.drop(s.id)
		case renew:
			if s.lease != nil {
				// The listed copy is the current one: a renewal whose answer
				// was lost left ours stale, and every renewal from a stale
				// copy would conflict until the Lease expired.
				m.held[s.id] = s.lease
			}
			due = append(due, s.id)
		case create:
			m.create(ctx, s.id)
		case acquire:
			m.acquire(ctx, s.id, s.lease)
		case collect:
			m.collect(ctx, s.lease)
		}
	}
	m.renewAll(ctx, due)
}

func holder(l *coordinationv1.Lease) string { return ptr.Deref(l.Spec.HolderIdentity, "") }

func leaseDuration(l *coordinationv1.Lease, def time.Duration) time.Duration {
	if l.Spec.LeaseDurationSeconds != nil {
		return time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second
	}
	return def
}

// spec is a Lease spec held by this replica from now, for d.
func (m *Manager) spec(d time.Duration, transitions int32) coordinationv1.LeaseSpec {
	now := metav1.NewMicroTime(m.cfg.Clock.Now())
	return coordinationv1.LeaseSpec{
		HolderIdentity:       new(m.cfg.Identity),
		LeaseDurationSeconds: new(int32((d + time.Second - 1) / time.Second)),
		AcquireTime:          &now,
		RenewTime:            &now,
		LeaseTransitions:     new(transitions),
	}
}

func (m *Manager) labels(role, clusterID string) map[string]string {
	l := map[string]string{LabelSet: m.cfg.Name, LabelRole: role}
	if clusterID != "" {
		l[LabelCluster] = clusterID
	}
	return l
}

// mayTakeOver (m.mu held): this replica's presence renewals have all
// worked for a lease duration, so a holder that did not renew in that time
// could have and is gone. A replica whose own writes fail (the hosting cluster
// overloaded, a network partition) takes nothing from others: when the
// hosting cluster was too slow for everybody's renewals, every Lease looks
// expired once it recovers, and taking them would move every member (the
// fleet benchmark saw it at load 20-30); the holders get a lease duration
// of working writes to renew first.
func (m *Manager) mayTakeOver(now time.Time) bool {
	return !m.writingSince.IsZero() && now.Sub(m.writingSince) >= m.cfg.LeaseDuration
}

// beginRound notes that a round began at now.
func (m *Manager) beginRound(now time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.roundBegan = now
}

// keepPresence renews this replica's presence Lease, apart from the
// rounds: a round lists every discovery Lease and writes member Leases,
// and on a loaded hosting cluster it took 10-20 s, so presence renewed in
// it lapsed and moved every member the replica held (issue 25's
// 250,000-node run: 24 failed renewals, 22 moves). It lets presence lapse
// once no round has begun for a lease duration and a round timeout: a
// replica whose rounds are stuck no longer minds its members, and the
// others must take them.
func (m *Manager) keepPresence(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, m.cfg.RoundTimeout)
	defer cancel()
	now := m.cfg.Clock.Now()
	m.mu.Lock()
	lastRound := m.roundBegan
	stuck := !lastRound.IsZero() && now.Sub(lastRound) > m.cfg.LeaseDuration+m.cfg.RoundTimeout
	lapsing := m.lapsing
	m.lapsing = stuck
	if stuck {
		m.writingSince = time.Time{}
	}
	m.mu.Unlock()
	if stuck {
		if !lapsing {
			klog.FromContext(ctx).Error(nil, "No discovery Lease round has begun for a lease duration; letting this replica's presence lapse so the others take its members", "lastRound", lastRound)
		}
		return
	}
	err := m.renewPresence(ctx)
	m.mu.Lock()
	defer m.mu.Unlock()
	switch {
	case err != nil:
		m.writingSince = time.Time{}
	case m.writingSince.IsZero():
		m.writingSince = now
	}
}

// renewPresence creates this replica's presence Lease, or renews it from
// the copy last written; after a conflict it renews the current copy.
func (m *Manager) renewPresence(ctx context.Context) error {
	name := ReplicaLeaseName(m.cfg.Name, m.cfg.Identity)
	client := m.cfg.Leases.Leases(m.cfg.Namespace)
	m.mu.Lock()
	cur := m.presence
	m.mu.Unlock()
	var written *coordinationv1.Lease
	var err error
	if cur == nil {
		written, err = client.Create(ctx, &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: m.labels(RoleReplica, "")},
			Spec:       m.spec(m.cfg.LeaseDuration, 0),
		}, metav1.CreateOptions{})
	} else {
		written, err = m.renewFrom(ctx, cur)
	}
	if apierrors.IsAlreadyExists(err) || apierrors.IsConflict(err) {
		// Written since our copy (an answer lost on the way): renew what
		// is there.
		if cur, err = client.Get(ctx, name, metav1.GetOptions{}); err == nil {
			written, err = m.renewFrom(ctx, cur)
		}
	}
	countWrite(RoleReplica, err)
	m.mu.Lock()
	defer m.mu.Unlock()
	switch {
	case err == nil:
		if m.presence == nil {
			m.joined = m.cfg.Clock.Now()
		}
		m.presence = written
	case apierrors.IsNotFound(err):
		m.presence = nil // deleted: create it again
	}
	if err != nil {
		klog.FromContext(ctx).Error(err, "Cannot renew this replica's presence Lease", "lease", name)
	}
	return err
}

// renewFrom writes l renewed by this replica now.
func (m *Manager) renewFrom(ctx context.Context, l *coordinationv1.Lease) (*coordinationv1.Lease, error) {
	l = l.DeepCopy()
	l.Spec.RenewTime = new(metav1.NewMicroTime(m.cfg.Clock.Now()))
	l.Spec.HolderIdentity = new(m.cfg.Identity)
	return m.cfg.Leases.Leases(m.cfg.Namespace).Update(ctx, l, metav1.UpdateOptions{})
}

// create creates a member's Lease held by this replica and starts it.
func (m *Manager) create(ctx context.Context, id string) {
	l, err := m.cfg.Leases.Leases(m.cfg.Namespace).Create(ctx, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: MemberLeaseName(m.cfg.Name, id), Labels: m.labels(RoleMember, id)},
		Spec:       m.spec(m.cfg.MemberLeaseDuration, 0),
	}, metav1.CreateOptions{})
	countWrite(RoleMember, err)
	if err != nil {
		if !apierrors.IsAlreadyExists(err) {
			klog.FromContext(ctx).Error(err, "Cannot create a member's Lease", "cluster", id)
		}
		return
	}
	m.took(ctx, id, l)
}

// acquire takes over an existing member Lease (free, expired, or ours) and
// starts the member; a conflict means another replica was faster.
func (m *Manager) acquire(ctx context.Context, id string, cur *coordinationv1.Lease) {
	l := cur.DeepCopy()
	transitions := ptr.Deref(l.Spec.LeaseTransitions, 0)
	if holder(l) != m.cfg.Identity {
		transitions++
	}
	l.Spec = m.spec(m.cfg.MemberLeaseDuration, transitions)
	l.Labels = m.labels(RoleMember, id)
	updated, err := m.cfg.Leases.Leases(m.cfg.Namespace).Update(ctx, l, metav1.UpdateOptions{})
	countWrite(RoleMember, err)
	if err != nil {
		if !apierrors.IsConflict(err) {
			klog.FromContext(ctx).Error(err, "Cannot take a member's Lease", "cluster", id)
		}
		return
	}
	m.took(ctx, id, updated)
}

func (m *Manager) took(ctx context.Context, id string, l *coordinationv1.Lease) {
	klog.FromContext(ctx).Info("Holding a member's Lease; mirroring it", "cluster", id, "transitions", ptr.Deref(l.Spec.LeaseTransitions, 0))
	m.held[id] = l
	m.target.Own(id)
}

// renewAll renews the held Leases of ids that are due (renewDue),
// concurrently: a round's renewals take one round trip however many
// members a replica holds (one after the other, a fleet's renewals
// outlasted the round under load). A conflict means someone else wrote a
// Lease: the next round sees who holds it. Other failures keep the member
// (see Manager).
func (m *Manager) renewAll(ctx context.Context, ids []string) {
	type renewal struct {
		id  string
		l   *coordinationv1.Lease
		err error
	}
	results := make(chan renewal, len(ids))
	var wg sync.WaitGroup
	for _, id := range ids {
		l := m.held[id].DeepCopy()
		if !m.renewDue(id, l) {
			continue
		}
		l.Spec.RenewTime = new(metav1.NewMicroTime(m.cfg.Clock.Now()))
		wg.Go(func() {
			updated, err := m.cfg.Leases.Leases(m.cfg.Namespace).Update(ctx, l, metav1.UpdateOptions{})
			countWrite(RoleMember, err)
			results <- renewal{id: id, l: updated, err: err}
		})
	}
	wg.Wait()
	close(results)
	for r := range results {
		switch {
		case apierrors.IsNotFound(r.err):
			klog.FromContext(ctx).Info("A member's Lease was deleted; stopping it", "cluster", r.id)
			m.drop(r.id)
		case r.err != nil:
			klog.FromContext(ctx).Error(r.err, "Cannot renew a member's Lease; mirroring it still", "cluster", r.id)
		default:
			m.held[r.id] = r.l
		}
	}
}

// renewDue: a held member Lease was last renewed a third of
// MemberLeaseDuration ago, and a further share of a third that depends on
// the member, so that members taken together (a fleet's at start-up) are
// renewed spread over a third of the duration, not in one burst.
func (m *Manager) renewDue(id string, l *coordinationv1.Lease) bool {
	if l.Spec.RenewTime == nil {
		return true
	}
	third := m.cfg.MemberLeaseDuration / 3
	spread := time.Duration(float64(third) * float64(score(id, m.cfg.Identity)) / float64(math.MaxUint64))
	return m.cfg.Clock.Since(l.Spec.RenewTime.Time) >= third+spread
}

// drop stops a member this replica no longer holds.
func (m *Manager) drop(id string) {
	m.target.Disown(id)
	delete(m.held, id)
}

// release stops a member, then gives up its Lease so another replica can
// take it at once.
func (m *Manager) release(ctx context.Context, id string) {
	l := m.held[id].DeepCopy()
	m.drop(id)
	m.giveUp(ctx, l)
}

// giveUp frees a held Lease (its member already stopped).
func (m *Manager) giveUp(ctx context.Context, l *coordinationv1.Lease) {
	id := l.Labels[LabelCluster]
	l.Spec.HolderIdentity = nil
	l.Spec.LeaseDurationSeconds = new(int32(1))
	l.Spec.RenewTime = new(metav1.NewMicroTime(m.cfg.Clock.Now()))
	_, err := m.cfg.Leases.Leases(m.cfg.Namespace).Update(ctx, l, metav1.UpdateOptions{})
	countWrite(RoleMember, err)
	if err != nil && !apierrors.IsConflict(err) {
		klog.FromContext(ctx).Error(err, "Cannot release a member's Lease; it expires instead", "cluster", id)
	}
}

// collect deletes a stale Lease, unless it changed since it was listed.
func (m *Manager) collect(ctx context.Context, l *coordinationv1.Lease) {
	err := m.cfg.Leases.Leases(m.cfg.Namespace).Delete(ctx, l.Name, metav1.DeleteOptions{
		Preconditions: &metav1.Preconditions{ResourceVersion: new(l.ResourceVersion)},
	})
	countWrite(l.Labels[LabelRole], err)
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		klog.FromContext(ctx).Error(err, "Cannot delete a stale discovery Lease", "lease", l.Name)
	}
}

// shutdown stops every held member, releases its Lease and deletes the
// presence Lease.
func (m *Manager) shutdown(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, m.cfg.LeaseDuration)
	defer cancel()
	// Stop the members one by one (each Disown waits for its worker), then
	// release their Leases concurrently: one after the other, a fleet's
	// releases outlasted a loaded hosting cluster's patience and the
	// process's grace period (the fleet benchmark saw 18 of 20 left held).
	held := make([]*coordinationv1.Lease, 0, len(m.held))
	for id, l := range m.held {
		held = append(held, l.DeepCopy())
		m.drop(id)
	}
	var wg sync.WaitGroup
	for _, l := range held {
		wg.Go(func() { m.giveUp(ctx, l) })
	}
	wg.Wait()
	m.mu.Lock()
	presence := m.presence
	m.mu.Unlock()
	if presence != nil {
		err := m.cfg.Leases.Leases(m.cfg.Namespace).Delete(ctx, presence.Name, metav1.DeleteOptions{})
		countWrite(RoleReplica, err)
		if err != nil && !apierrors.IsNotFound(err) {
			klog.FromContext(ctx).Error(err, "Cannot delete this replica's presence Lease; it expires instead")
		}
	}
}
