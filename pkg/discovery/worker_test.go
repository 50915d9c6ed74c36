package discovery

import (
	"testing"

	"k8s.io/utils/clock"

	"github.com/example/platform-apiserver/pkg/registry/store"
)

func TestWorkerState(t *testing.T) {
	tests := []struct {
		name string
		set  func(a, b *syncer)
		want store.MemberState
	}{
		{name: "first sync running", set: func(a, b *syncer) { a.synced = true }, want: store.MemberSyncing},
		{name: "all synced", set: func(a, b *syncer) { a.synced, b.synced = true, true }, want: store.MemberSynced},
		{name: "one unreachable", set: func(a, b *syncer) { a.synced, b.synced, b.unreachable = true, true, true }, want: store.MemberUnreachable},
		{name: "stuck beats unreachable", set: func(a, b *syncer) { a.unreachable, b.stuck = true, true }, want: store.MemberLagging},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, b := newSyncer(syncerParams{Clock: clock.RealClock{}}), newSyncer(syncerParams{Clock: clock.RealClock{}})
			tt.set(a, b)
			w := &worker{syncers: []*syncer{a, b}}
			if got := w.state(); got != tt.want {
				t.Errorf("state = %s, want %s", got, tt.want)
			}
		})
	}
}
