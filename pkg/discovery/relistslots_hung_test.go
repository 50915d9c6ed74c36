package discovery

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
)

// TestSyncerRelistOfAHungMember: a member whose API server stops answering
// mid-relist (a hung host: the connection stays open, nothing comes back)
// fails the page after Sync.ListTimeout, so the relist gives its slot back
// for other members' relists and the member is marked unreachable, instead
// of holding both for ever.
func TestSyncerRelistOfAHungMember(t *testing.T) {
	hung := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select { // every request hangs, as on a SIGSTOPped host
		case <-hung:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(func() { close(hung); srv.Close() })
	client, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	m, st := newFakeMember(), &recordingStore{}
	slots := newRelistSlots(1, clock.RealClock{})
	s := runSyncer(t, m, st, func(p *syncerParams) {
		p.Client, p.Relists, p.Sync.ListTimeout = client, slots, 200*time.Millisecond
		p.Sync.Backoff.Duration = time.Second // the slot stays free for a while between attempts
	})
	waitFor(t, "the hung member marked unreachable", func() bool { return s.status().unreachable })
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	release, ok := s.Relists.acquire(ctx, false)
	if !ok {
		t.Fatal("another member's relist got no slot while the hung member was being relisted")
	}
	release()
	if n := len(st.snapshot()); n != 0 {
		t.Errorf("%d batches committed from a member that answered nothing", n)
	}
}
