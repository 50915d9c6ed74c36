package discovery

import (
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/component-base/metrics/testutil"

	"github.com/example/platform-apiserver/pkg/registry/store"
)

// optionalMember serves one DRA resource: list answers with the error
// answer returns (nil: a list at resourceVersion 300 with one object), and
// watches the test feeds, or that fail with watchErr when it is set.
type optionalMember struct {
	fakeMember
	resource store.Resource
	// lists holds each list's time.
	lists []time.Time
	// answer is the error the next list answers with.
	answer   func(n int) error
	watchErr error
}

func newOptionalMember(r store.Resource, answer func(n int) error) *optionalMember {
	m := &optionalMember{fakeMember: fakeMember{client: fake.NewClientset(), watcher: make(chan *watch.FakeWatcher, 10)},
		resource: r, answer: answer}
	m.client.PrependReactor("list", string(r), func(clienttesting.Action) (bool, runtime.Object, error) {
		m.mu.Lock()
		defer m.mu.Unlock()
		m.lists = append(m.lists, time.Now())
		if err := m.answer(len(m.lists)); err != nil {
			return true, nil, err
		}
		if r == store.ResourceResourceSlices {
			return true, &resourcev1.ResourceSliceList{ListMeta: metav1.ListMeta{ResourceVersion: "300"},
				Items: []resourcev1.ResourceSlice{{ObjectMeta: metav1.ObjectMeta{Name: "s", ResourceVersion: "290"},
					Spec: resourcev1.ResourceSliceSpec{Driver: "gpu.example.com", Pool: resourcev1.ResourcePool{Name: "node-1"},
						NodeName: new("node-1"), Devices: []resourcev1.Device{{Name: "gpu-0"}}}}}}, nil
		}
		return true, &resourcev1.ResourceClaimList{ListMeta: metav1.ListMeta{ResourceVersion: "300"},
			Items: []resourcev1.ResourceClaim{{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "c", ResourceVersion: "290"}}}}, nil
	})
	m.client.PrependWatchReactor(string(r), func(a clienttesting.Action) (bool, watch.Interface, error) {
		m.mu.Lock()
		defer m.mu.Unlock()
		m.watches = append(m.watches, a.(clienttesting.WatchActionImpl).ListOptions.ResourceVersion)
		if m.watchErr != nil {
			err := m.watchErr
			m.watchErr = nil
			return true, nil, err
		}
		w := watch.NewFakeWithChanSize(10, false)
		m.watcher <- w
		return true, w, nil
	})
	return m
}

func (m *optionalMember) listTimes() []time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]time.Time(nil), m.lists...)
}

// notServed is kube-apiserver's answer for a group version it does not
// serve (404 page not found).
func notServed(group string, r store.Resource) error {
	return apierrors.NewGenericServerResponse(http.StatusNotFound, "list",
		schema.GroupResource{Group: group, Resource: string(r)}, "", "404 page not found", 0, true)
}

func forbidden(r store.Resource) error {
	return apierrors.NewForbidden(schema.GroupResource{Group: resourcev1.GroupName, Resource: string(r)}, "",
		errorString("user \"system:serviceaccount:platform-system:platform-apiserver\" cannot list resource"))
}

type errorString string

func (e errorString) Error() string { return string(e) }

func gauge(t *testing.T, r store.Resource, state store.APIState) float64 {
	t.Helper()
	v, err := testutil.GetGaugeMetricValue(unserved.WithLabelValues("c1", string(r), string(state)))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func optionalErrors(t *testing.T, r store.Resource, reason string) float64 {
	t.Helper()
	v, err := testutil.GetCounterMetricValue(errorsTotal.WithLabelValues("c1", string(r), reason))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestSyncerOptionalResourceAbsent: a member that does not serve
// resource.k8s.io/v1 answers the list of resourceslices 404. One batch
// records the resource Absent (no records, the cursor cleared), the
// resource counts as synced and the member as reached, and it is listed
// again only after the recheck interval; the same answer again commits
// nothing, and once the member serves it, the relist's Replace records it
// served and a watch follows.
func TestSyncerOptionalResourceAbsent(t *testing.T) {
	const recheck = 150 * time.Millisecond
	r := store.ResourceResourceSlices
	var served atomic.Bool
	m := newOptionalMember(r, func(int) error {
		if served.Load() {
			return nil
		}
		return notServed(resourcev1.GroupName, r)
	})
	st := &recordingStore{}
	RegisterMetrics()
	before := optionalErrors(t, r, "api_absent")
	s := runSyncer(t, &m.fakeMember, st, func(p *syncerParams) {
		p.Resource = mustResource(t, r)
		p.Sync.UnservedRecheck = recheck
	})

	waitFor(t, "the Absent batch", func() bool { return len(st.snapshot()) == 1 })
	b := st.snapshot()[0]
	if len(b.Unserved) != 1 || b.Unserved[r] != store.APIAbsent {
		t.Errorf("batch unserved %v, want resourceslices Absent", b.Unserved)
	}
	if cur, ok := b.Cursors[r]; !ok || cur != "" || len(b.Replace) != 0 || len(b.Slices) != 0 {
		t.Errorf("the Absent batch %+v: want the cursor cleared, no Replace, no slices", b)
	}
	waitFor(t, "synced", func() bool { return s.status().synced })
	if s.status().unreachable || s.status().stuck {
		t.Errorf("status %+v: a member not serving an optional resource is neither unreachable nor stuck", s.status())
	}
	if got := gauge(t, r, store.APIAbsent); got != 1 {
		t.Errorf("unserved{state=Absent} = %v, want 1", got)
	}

	// The member records a list when it answers; the syncer counts the
	// answer after: wait for the count, not the list.
	waitFor(t, "two rechecks counted", func() bool { return optionalErrors(t, r, "api_absent")-before >= 3 })
	lists := m.listTimes()
	for i := 1; i < len(lists); i++ {
		if d := lists[i].Sub(lists[i-1]); d < recheck {
			t.Errorf("list %d came %s after the one before, want the recheck interval %s", i+1, d, recheck)
		}
	}
	if got := len(st.snapshot()); got != 1 {
		t.Errorf("%d batches after rechecks with the same answer, want still the one", got)
	}
	if got := optionalErrors(t, r, "api_absent") - before; got > float64(len(lists)) {
		t.Errorf("api_absent counted %v times for %d answers", got, len(lists))
	}

	served.Store(true)
	w := nextWatcher(t, &m.fakeMember)
	batches := st.snapshot()
	last := batches[len(batches)-1]
	if len(batches) != 2 || len(last.Replace) != 1 || last.Replace[0] != r || len(last.Slices) != 1 ||
		last.Cursors[r] != "300" || len(last.Unserved) != 0 {
		t.Fatalf("batches %+v; want the Absent one, then the relist with Replace, the slice and cursor 300", batches)
	}
	if m.watches[len(m.watches)-1] != "300" {
		t.Errorf("watch from %q, want the list's 300", m.watches[len(m.watches)-1])
	}
	if got := gauge(t, r, store.APIAbsent); got != 0 {
		t.Errorf("unserved{state=Absent} = %v once served, want 0", got)
	}
	// Mirrored as any resource from there on.
	w.Add(&resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "s2", ResourceVersion: "301"},
		Spec: resourcev1.ResourceSliceSpec{Driver: "gpu.example.com", AllNodes: new(true), Devices: []resourcev1.Device{{Name: "d"}}}})
	waitFor(t, "the watch batch", func() bool {
		b := st.snapshot()
		return b[len(b)-1].Cursors[r] == "301" && len(b[len(b)-1].Slices) == 1
	})
}

// TestSyncerOptionalResourceForbiddenWatch: resuming from its cursor, the
// watch of resourceclaims is refused (403, the ClusterRole lacks the DRA
// rule): one batch records it Forbidden and clears the cursor, the member
// is reached and synced, and after the recheck the resource is listed
// (not watched from the old cursor) and, served now, replaced.
func TestSyncerOptionalResourceForbiddenWatch(t *testing.T) {
	const recheck = 150 * time.Millisecond
	r := store.ResourceResourceClaims
	m := newOptionalMember(r, func(int) error { return nil })
	m.watchErr = forbidden(r)
	st := &recordingStore{cursor: "500"}
	RegisterMetrics()
	before := optionalErrors(t, r, "forbidden")
	s := runSyncer(t, &m.fakeMember, st, func(p *syncerParams) {
		p.Resource = mustResource(t, r)
		p.Sync.UnservedRecheck = recheck
	})

	waitFor(t, "the Forbidden batch", func() bool { return len(st.snapshot()) == 1 })
	forbiddenAt := time.Now()
	b := st.snapshot()[0]
	if b.Unserved[r] != store.APIForbidden || b.Cursors[r] != "" || len(b.Claims) != 0 {
		t.Errorf("batch %+v, want resourceclaims Forbidden with the cursor cleared", b)
	}
	waitFor(t, "synced", func() bool { return s.status().synced })
	if s.status().unreachable {
		t.Error("a 403 of an optional resource made the member unreachable")
	}
	if got := gauge(t, r, store.APIForbidden); got != 1 {
		t.Errorf("unserved{state=Forbidden} = %v, want 1", got)
	}
	if got := optionalErrors(t, r, "forbidden") - before; got != 1 {
		t.Errorf("forbidden counted %v times, want 1", got)
	}

	nextWatcher(t, &m.fakeMember)
	lists := m.listTimes()
	if len(lists) != 1 || lists[0].Sub(forbiddenAt) < recheck-20*time.Millisecond {
		t.Errorf("lists at %v after the 403 at %v; want one, a recheck interval later", lists, forbiddenAt)
	}
	batches := st.snapshot()
	last := batches[len(batches)-1]
	if len(batches) != 2 || len(last.Replace) != 1 || len(last.Claims) != 1 || last.Cursors[r] != "300" {
		t.Fatalf("batches %+v; want the Forbidden one, then the relist replacing resourceclaims at 300", batches)
	}
	if m.watches[0] != "500" || m.watches[len(m.watches)-1] != "300" {
		t.Errorf("watches %v, want from the cursor 500, then from the list's 300", m.watches)
	}
	if got := gauge(t, r, store.APIForbidden); got != 0 {
		t.Errorf("unserved{state=Forbidden} = %v once served, want 0", got)
	}
}

// TestSyncerOptionalResourceStateChange: a member that stops forbidding and
// does not serve the resource either (Forbidden, then Absent) commits the
// new state.
func TestSyncerOptionalResourceStateChange(t *testing.T) {
	r := store.ResourceResourceSlices
	m := newOptionalMember(r, func(n int) error {
		if n == 1 {
			return forbidden(r)
		}
		return notServed(resourcev1.GroupName, r)
	})
	st := &recordingStore{}
	runSyncer(t, &m.fakeMember, st, func(p *syncerParams) {
		p.Resource = mustResource(t, r)
		p.Sync.UnservedRecheck = 20 * time.Millisecond
	})
	waitFor(t, "two states", func() bool { return len(st.snapshot()) >= 2 })
	waitFor(t, "more rechecks", func() bool { return len(m.listTimes()) >= 4 })
	b := st.snapshot()
	if len(b) != 2 || b[0].Unserved[r] != store.APIForbidden || b[1].Unserved[r] != store.APIAbsent {
		t.Errorf("batches %+v, want Forbidden then Absent, once each", b)
	}
}

// TestSyncerRequiredResourceNotFoundRetries: a 404 of a resource that is not
// optional is a failure, retried with backoff as before: nothing is
// recorded unserved.
func TestSyncerRequiredResourceNotFoundRetries(t *testing.T) {
	m, st := newFakeMember(), &recordingStore{}
	calls := 0
	m.client.PrependReactor("list", "namespaces", func(clienttesting.Action) (bool, runtime.Object, error) {
		calls++
		if calls <= 2 {
			return true, nil, notServed("", store.ResourceNamespaces)
		}
		return false, nil, nil
	})
	startSyncer(t, m, st)
	nextWatcher(t, m)
	b := st.snapshot()
	if calls != 3 || len(b) != 1 || len(b[0].Unserved) != 0 || len(b[0].Replace) != 1 {
		t.Errorf("%d lists, batches %+v; want two failures retried, then the list committed", calls, b)
	}
}
