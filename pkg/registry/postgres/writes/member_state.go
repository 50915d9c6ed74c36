package writes

import (
	"context"
	"fmt"
	"time"

	"github.com/example/platform-apiserver/pkg/registry/store"
)

var sqlMemberState = statement("member_state")

// RecordMemberState records a member's mirroring state, the time of the
// last change mirrored, its usage heartbeat and how far its mirror is
// complete on its ClusterCapacity when any moved, creating the row of a member that has none yet, fenced like
// every discovery write.
func (e *Engine) RecordMemberState(ctx context.Context, f store.Fence, st store.MemberStatus) error {
	err := e.Write(ctx, opMemberState, Sections{
		Member: func(w *Writer) error { return w.Fence(f) },
		Views: func(w *Writer) error {
			return w.Stamp("record member state", sqlMemberState, f.ClusterID, string(st.State), nonZero(st.LastChange), nonZero(st.LastUsage), nonZero(st.CompleteAsOf))
		},
	})
	if err != nil {
		return fmt.Errorf("record state of member %s: %w", f.ClusterID, err)
	}
	return nil
}

// nonZero is t, or nil (SQL NULL) when t is zero.
func nonZero(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}
