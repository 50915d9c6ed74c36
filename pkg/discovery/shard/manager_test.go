package shard

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	coordinationclient "k8s.io/client-go/kubernetes/typed/coordination/v1"
	k8stesting "k8s.io/client-go/testing"
	testingclock "k8s.io/utils/clock/testing"
)

// target records what a manager owns.
type target struct {
	members []string
	mu      sync.Mutex
	owned   map[string]bool
	starts  int
}

func (t *target) Members() []string { return t.members }
func (t *target) Own(id string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.owned[id] = true
	t.starts++
}
func (t *target) Disown(id string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.owned, id)
}
func (t *target) ids() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []string
	for id := range t.owned {
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}

const (
	testLease = 10 * time.Second
	testRetry = time.Second
)

type replica struct {
	m      *Manager
	target *target
	dead   bool
	// stuck: its rounds no longer begin; its presence loop still runs.
	stuck bool
	// listFails fails its Lease lists, as a round timeout on a loaded
	// hosting cluster does; listHangs makes them wait for their context.
	listFails, listHangs atomic.Bool
}

// replicaLeases is a replica's view of the hosting cluster's Leases.
type replicaLeases struct {
	coordinationclient.LeasesGetter
	r *replica
}

func (l replicaLeases) Leases(ns string) coordinationclient.LeaseInterface {
	return replicaLeaseClient{LeaseInterface: l.LeasesGetter.Leases(ns), r: l.r}
}

type replicaLeaseClient struct {
	coordinationclient.LeaseInterface
	r *replica
}

func (c replicaLeaseClient) List(ctx context.Context, opts metav1.ListOptions) (*coordinationv1.LeaseList, error) {
	if c.r.listHangs.Load() {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	if c.r.listFails.Load() {
		return nil, fmt.Errorf("the server was unable to return a response in the time allotted")
	}
	return c.LeaseInterface.List(ctx, opts)
}

// fleet runs managers over one fake hosting cluster, round by round on a
// fake clock.
type fleet struct {
	t        *testing.T
	clock    *testingclock.FakeClock
	client   *fake.Clientset
	members  []string
	replicas []*replica
}

func newFleet(t *testing.T, members int) *fleet {
	f := &fleet{t: t, clock: testingclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)), client: fake.NewClientset()}
	for i := range members {
		f.members = append(f.members, fmt.Sprintf("member-%d", i))
	}
	return f
}

func (f *fleet) add(identity string) *replica {
	r := &replica{target: &target{members: f.members, owned: map[string]bool{}}}
	m, err := New(Config{Leases: replicaLeases{LeasesGetter: f.client.CoordinationV1(), r: r}, Namespace: "platform", Name: "discovery", Identity: identity,
		LeaseDuration: testLease, RetryPeriod: testRetry, Clock: f.clock}, r.target)
	if err != nil {
		f.t.Fatal(err)
	}
	r.m = m
	f.replicas = append(f.replicas, r)
	return r
}

// rounds advances the clock by the retry period, renews every live
// replica's presence and syncs those not stuck, n times (Run does both
// on their own timers).
func (f *fleet) rounds(n int) {
	for range n {
		f.clock.Step(testRetry)
		for _, r := range f.replicas {
			if r.dead {
				continue
			}
			r.m.keepPresence(context.Background())
			if !r.stuck {
				r.m.sync(context.Background())
			}
		}
	}
}

// owners maps each member to the replicas mirroring it.
func (f *fleet) owners() map[string][]int {
	out := map[string][]int{}
	for i, r := range f.replicas {
		if r.dead {
			continue
		}
		for _, id := range r.target.ids() {
			out[id] = append(out[id], i)
		}
	}
	return out
}

// checkExclusive fails unless every member is mirrored by exactly one live
// replica and the loads are fair.
func (f *fleet) checkExclusive(what string) {
	f.t.Helper()
	owners := f.owners()
	load := map[int]int{}
	for _, id := range f.members {
		if len(owners[id]) != 1 {
			f.t.Errorf("%s: member %s mirrored by replicas %v, want exactly one", what, id, owners[id])
			continue
		}
		load[owners[id][0]]++
	}
	live := 0
	for _, r := range f.replicas {
		if !r.dead {
			live++
		}
	}
	limit := (len(f.members) + live - 1) / live
	for i, n := range load {
		if n > limit {
			f.t.Errorf("%s: replica %d mirrors %d members, fair share is at most %d", what, i, n, limit)
		}
	}
}

// settledFleet is members shared by replicas after a few rounds.
func settledFleet(t *testing.T, members, replicas int) *fleet {
	f := newFleet(t, members)
	for i := range replicas {
		f.add(fmt.Sprintf("replica-%d", i))
	}
	f.rounds(4)
	f.checkExclusive(fmt.Sprintf("%d replicas", replicas))
	return f
}

// placement is who mirrors what, and how many members each replica started.
type placement struct {
	owners string
	starts []int
}

func (f *fleet) placement() placement {
	p := placement{owners: fmt.Sprint(f.owners())}
	for _, r := range f.replicas {
		p.starts = append(p.starts, r.target.starts)
	}
	return p
}

// checkUnmoved fails unless every member is mirrored as in before and no
// replica started a member since.
func (f *fleet) checkUnmoved(what string, before placement) {
	f.t.Helper()
	f.checkExclusive(what)
	now := f.placement()
	if now.owners != before.owners {
		f.t.Errorf("%s: members moved: %s, before %s", what, now.owners, before.owners)
	}
	for i := range f.replicas {
		if n := now.starts[i] - before.starts[i]; n != 0 {
			f.t.Errorf("%s: replica %d started %d members, want none", what, i, n)
		}
	}
}

// TestManagerSharesAndFailsOver: three replicas share six members two each;
// a replica that dies without releasing loses its members to the others
// after the lease duration, one that stops releases them at once, and one
// that joins takes its share.
func TestManagerSharesAndFailsOver(t *testing.T) {
	f := settledFleet(t, 6, 3)
	for i, r := range f.replicas {
		if n := len(r.target.ids()); n != 2 {
			t.Errorf("replica %d mirrors %d members, want 2", i, n)
		}
	}

	// Replica 0 dies: its Leases stay until they expire.
	before := map[int][]string{1: f.replicas[1].target.ids(), 2: f.replicas[2].target.ids()}
	f.replicas[0].dead = true
	f.rounds(int(testLease/testRetry) - 2)
	if owners := f.owners(); len(owners) != 4 {
		t.Errorf("within the lease duration of a death: %d members mirrored, want the survivors' 4 (%v)", len(owners), owners)
	}
	f.rounds(4)
	f.checkExclusive("after a death")
	for i, ids := range before {
		if now := f.replicas[i].target.ids(); !isSubset(ids, now) {
			t.Errorf("after a death: survivor %d mirrors %v, had %v: a survivor's member moved", i, now, ids)
		}
	}

	// Replica 1 stops gracefully: its members move without waiting.
	f.replicas[1].m.shutdown(context.Background())
	f.replicas[1].dead = true
	f.rounds(2)
	f.checkExclusive("after a graceful stop")

	// A new replica joins and takes half; nothing else moves.
	starts := f.replicas[2].target.starts
	f.add("replica-3")
	f.rounds(8)
	f.checkExclusive("after a join")
	if n := len(f.replicas[3].target.ids()); n != 3 {
		t.Errorf("joined replica mirrors %d members, want 3", n)
	}
	if n := f.replicas[2].target.starts; n != starts {
		t.Errorf("after a join: the old replica started %d members, want none", n-starts)
	}
}

func isSubset(small, big []string) bool {
	for _, s := range small {
		if !slices.Contains(big, s) {
			return false
		}
	}
	return true
}

// TestManagerKeepsMembersWhenHostingUnreachable: when the Leases cannot be
// read, a replica keeps mirroring what it holds.
func TestManagerKeepsMembersWhenHostingUnreachable(t *testing.T) {
	f := newFleet(t, 2)
	r := f.add("replica-0")
	f.rounds(3)
	if got := r.target.ids(); len(got) != 2 {
		t.Fatalf("owned %v, want both members", got)
	}
	f.client.PrependReactor("*", "leases", func(action k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, fmt.Errorf("connection refused")
	})
	f.rounds(int(3 * testLease / testRetry))
	if got := r.target.ids(); len(got) != 2 {
		t.Errorf("after the hosting cluster was unreachable for 3 lease durations: owned %v, want both members still", got)
	}
}

// TestManagerKeepsMembersThroughHostingOverload: the hosting cluster
// answers lists but no Lease write gets through for two lease durations
// (overloaded); once it recovers, every Lease looks expired to everyone,
// but nobody takes another's members: each replica renews its own first.
func TestManagerKeepsMembersThroughHostingOverload(t *testing.T) {
	f := settledFleet(t, 6, 3)
	before := f.placement()

	var overloaded atomic.Bool
	overloaded.Store(true)
	f.client.PrependReactor("*", "leases", func(action k8stesting.Action) (bool, runtime.Object, error) {
		if overloaded.Load() && action.GetVerb() != "list" {
			return true, nil, fmt.Errorf("the server was unable to return a response in the time allotted")
		}
		return false, nil, nil
	})
	f.rounds(int(2 * testLease / testRetry))
	overloaded.Store(false)
	f.rounds(int(3 * testLease / testRetry))
	f.checkUnmoved("through and after an overload of the hosting cluster", before)
}

// TestManagerWritesFewMemberLeases: a settled fleet writes its presence
// Leases every round but each member's Lease at most once per third of
// Config.MemberLeaseDuration, spread over the members, and nothing moves:
// renewing every member's Lease every third of the lease duration was a
// hundred writes a second for 200 members, which thrashed a loaded hosting
// cluster (issue 25).
func TestManagerWritesFewMemberLeases(t *testing.T) {
	const members = 60
	f := settledFleet(t, members, 3)
	before := f.placement()
	var memberWrites, presenceWrites atomic.Int64
	var mu sync.Mutex
	perRound := map[time.Time]int{} // member Lease writes by round
	f.client.PrependReactor("update", "leases", func(action k8stesting.Action) (bool, runtime.Object, error) {
		l := action.(k8stesting.UpdateAction).GetObject().(*coordinationv1.Lease)
		if l.Labels[LabelRole] == RoleMember {
			memberWrites.Add(1)
			mu.Lock()
			perRound[f.clock.Now()]++
			mu.Unlock()
		} else {
			presenceWrites.Add(1)
		}
		return false, nil, nil
	})
	// One member Lease duration: every member renewed once or twice (due
	// after a third plus up to another third of it).
	period := defaultMemberLeases * testLease
	rounds := int(period / testRetry)
	f.rounds(rounds)
	f.checkUnmoved("a settled fleet after a member Lease duration", before)
	if got, want := presenceWrites.Load(), int64(3*rounds); got != want {
		t.Errorf("%d presence Lease writes in %d rounds of 3 replicas, want %d", got, rounds, want)
	}
	if got := memberWrites.Load(); got < members || got > 2*members {
		t.Errorf("%d member Lease writes for %d members in one member Lease duration, want one or two each", got, members)
	}
	// Spread: members taken together are not renewed together.
	if most := slices.Max(slices.Collect(maps.Values(perRound))); most > members/5 {
		t.Errorf("%d member Lease writes in one round, want at most %d: renewals are not spread", most, members/5)
	}
}

// TestManagerPresenceOutlastsFailingRounds: a replica whose rounds fail
// (its Lease lists time out on a loaded hosting cluster) keeps its members
// for as long as its presence renewals get through: presence is renewed
// apart from the rounds. Renewed in the round after its list, it lapsed
// and every member it held moved (issue 25's 250,000-node run).
func TestManagerPresenceOutlastsFailingRounds(t *testing.T) {
	f := settledFleet(t, 6, 3)
	before := f.placement()
	f.replicas[0].listFails.Store(true)
	f.rounds(int(3 * testLease / testRetry))
	f.replicas[0].listFails.Store(false)
	f.rounds(2)
	f.checkUnmoved("while and after a replica's rounds failed for 3 lease durations", before)
}

// TestManagerLetsPresenceLapseWhenRoundsStop: a replica whose rounds no
// longer begin (stuck) stops renewing its presence after a lease duration
// and a round timeout, and the others take its members once it lapsed.
func TestManagerLetsPresenceLapseWhenRoundsStop(t *testing.T) {
	f := settledFleet(t, 6, 3)
	stuck := f.replicas[0]
	held := stuck.target.ids()
	var presenceWrites atomic.Int64
	name := ReplicaLeaseName("discovery", "replica-0")
	f.client.PrependReactor("update", "leases", func(action k8stesting.Action) (bool, runtime.Object, error) {
		if action.(k8stesting.UpdateAction).GetObject().(*coordinationv1.Lease).Name == name {
			presenceWrites.Add(1)
		}
		return false, nil, nil
	})
	stuck.stuck = true
	// Round timeout defaults to the lease duration: presence is renewed
	// for two lease durations after the last round, then lapses.
	lapse := int(2 * testLease / testRetry)
	f.rounds(lapse)
	if got := presenceWrites.Load(); got < int64(lapse)-1 {
		t.Errorf("%d presence renewals in the %d rounds after the stuck replica's last round, want about %d", got, lapse, lapse)
	}
	if owners := f.owners(); len(owners) != 6 || len(stuck.target.ids()) != len(held) {
		t.Errorf("before its presence lapsed: owners %v, want the stuck replica's members still with it", owners)
	}
	writes := presenceWrites.Load()
	f.rounds(int(2 * testLease / testRetry))
	if got := presenceWrites.Load() - writes; got > 1 {
		t.Errorf("%d presence renewals by a replica whose rounds stopped two lease durations ago, want at most 1", got)
	}
	stuck.dead = true // what it still believes it mirrors no longer counts
	f.checkExclusive("after a stuck replica's presence lapsed")
}

// TestRunRenewsPresenceWhileRoundsHang: Run renews presence on its own
// timer while a round hangs in its Lease list.
func TestRunRenewsPresenceWhileRoundsHang(t *testing.T) {
	f := newFleet(t, 2)
	r := f.add("replica-0")
	var presenceWrites atomic.Int64
	f.client.PrependReactor("*", "leases", func(action k8stesting.Action) (bool, runtime.Object, error) {
		if action.GetVerb() == "update" || action.GetVerb() == "create" {
			if l := action.(k8stesting.CreateAction).GetObject().(*coordinationv1.Lease); l.Labels[LabelRole] == RoleReplica {
				presenceWrites.Add(1)
			}
		}
		return false, nil, nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.m.Run(ctx)
	}()
	defer func() {
		cancel()
		<-done
	}()
	// step waits for Run's timers, then moves the clock past one jittered
	// retry period.
	step := func() {
		for deadline := time.Now().Add(10 * time.Second); !f.clock.HasWaiters(); {
			if time.Now().After(deadline) {
				t.Fatal("no timer of Run waits within 10s: nothing renews presence while a round hangs")
			}
			time.Sleep(time.Millisecond)
		}
		f.clock.Step(2 * testRetry)
	}
	for range 3 {
		step()
	}
	r.listHangs.Store(true)
	step() // the next round hangs in its list, for the round timeout
	before := presenceWrites.Load()
	for range 5 {
		step()
	}
	// The presence loop may be between its write and its next timer.
	for deadline := time.Now().Add(10 * time.Second); presenceWrites.Load()-before < 4 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	if got := presenceWrites.Load() - before; got < 4 {
		t.Errorf("%d presence renewals in 5 retry periods of a hung round, want at least 4", got)
	}
}
