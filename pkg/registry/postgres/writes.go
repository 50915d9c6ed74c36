package postgres

import (
	"context"

	"github.com/example/platform-apiserver/pkg/registry/store"
)

// The registry's writes are package writes' (the write engine); the store
// runs them on its writes pool (docs/write-path.md).

// Apply commits a discovery batch, fenced by its epoch (writes.Engine.Apply).
func (s *Store) Apply(ctx context.Context, b store.Batch) error {
	return s.engine.Apply(ctx, b)
}

// Cursor returns the persisted member resourceVersion for a resource, "" if none.
func (s *Store) Cursor(ctx context.Context, clusterID string, r store.Resource) (string, error) {
	return s.engine.Cursor(ctx, clusterID, r)
}

// ClaimMember gives the member a fresh epoch, fencing out the writes of
// earlier claims (writes.Engine.ClaimMember).
func (s *Store) ClaimMember(ctx context.Context, clusterID, owner string) (store.Fence, error) {
	return s.engine.ClaimMember(ctx, clusterID, owner)
}

// ReconcileMembers records a replica's view of the members and removes
// those absent for the grace period (writes.Engine.ReconcileMembers).
func (s *Store) ReconcileMembers(ctx context.Context, v store.MembersView) (store.MembersReconciled, error) {
	return s.engine.ReconcileMembers(ctx, v)
}

// Clusters returns the ids of every member cluster not removed that has
// rows (writes.Engine.Clusters).
func (s *Store) Clusters(ctx context.Context) ([]string, error) {
	return s.engine.Clusters(ctx)
}

// CheckMemberIdentity records a member's identity and drops its cursors
// when it differs from the recorded one, fenced like a write
// (writes.Engine.CheckMemberIdentity).
func (s *Store) CheckMemberIdentity(ctx context.Context, f store.Fence, identity string) (bool, error) {
	return s.engine.CheckMemberIdentity(ctx, f, identity)
}

// RecordMemberState records a member's mirroring state on its
// ClusterCapacity, fenced (writes.Engine.RecordMemberState).
func (s *Store) RecordMemberState(ctx context.Context, f store.Fence, st store.MemberStatus) error {
	return s.engine.RecordMemberState(ctx, f, st)
}
