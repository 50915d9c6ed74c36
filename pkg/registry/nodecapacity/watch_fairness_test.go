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

func (s *signal) signalled() bool {
	select {
	case <-s.c:
		return true
	default:
		return false
	}
}

// TestWatchSignalsInitialized checks that a watch tells priority and
// fairness it is initialized once its initial events are out, so its seat
// is freed then rather than held for the life of the watch, and not before.
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
	if sig.signalled() {
		t.Fatal("signalled before the initial events were read")
	}
	next(t, w, 2, false)
	waitSignal(t, sig, "after the initial events")

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
