package nodecapacity_test

import (
	"context"
	"sync"
	"testing"
	"time"

	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	utilflowcontrol "k8s.io/apiserver/pkg/util/flowcontrol"

	"github.com/example/platform-apiserver/pkg/registry/feed"
)

// signal records priority and fairness' watch initialization signal.
type signal struct {
	once sync.Once
	c    chan struct{}
}

func newSignal() *signal { return &signal{c: make(chan struct{})} }

func (s *signal) Signal() { s.once.Do(func() { close(s.c) }) }

func (s *signal) Wait() { <-s.c }

// TestWatchSignalsInitialized checks that a watch tells priority and
// fairness it is initialized once its first page of initial events is read,
// so its seat is freed then rather than held while a slow client reads the
// rest, or for the life of the watch.
func TestWatchSignalsInitialized(t *testing.T) {
	s := newStack(t, feed.Options{}, 0)
	s.mem.Put(nc("c", "a", nil))
	last := s.mem.Put(nc("c", "b", nil))
	waitFollower(t, s, last)

	sig := newSignal()
	ctx := utilflowcontrol.WithInitializationSignal(t.Context(), sig)
	w, err := s.rest.Watch(ctx, &metainternalversion.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	// The client has read nothing yet: a slow one gives back its seat.
	waitSignal(t, sig, "once the first page is read, before the client reads an event")
	next(t, w, 2, false)

	// A watch from now on has nothing to send first.
	sig = newSignal()
	ctx = utilflowcontrol.WithInitializationSignal(t.Context(), sig)
	w2, err := s.rest.Watch(ctx, &metainternalversion.ListOptions{ResourceVersion: rv(last)})
	if err != nil {
		t.Fatal(err)
	}
	defer w2.Stop()
	waitSignal(t, sig, "of a watch without initial events")
}

func waitSignal(t *testing.T, sig *signal, what string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	select {
	case <-sig.c:
	case <-ctx.Done():
		t.Fatalf("no initialization signal %s", what)
	}
}
