package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/example/platform-apiserver/pkg/registry/store"
)

// testNotifications: a commit after Notifications returned delivers a
// value, and the channel closes when ctx ends.
func testNotifications(t *testing.T, h Harness) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	notes, err := h.Feed().Notifications(ctx)
	if err != nil {
		t.Fatal(err)
	}
	h.Put(t, store.KindNodeCapacity, "a", "n1")
	select {
	case _, ok := <-notes:
		if !ok {
			t.Fatal("the channel closed before ctx ended")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no notification after a commit")
	}
	cancel()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case _, ok := <-notes:
			if !ok {
				return
			}
		case <-timeout:
			t.Fatal("the channel did not close after ctx ended")
		}
	}
}
