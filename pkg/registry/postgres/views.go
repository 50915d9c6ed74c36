package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/example/platform-apiserver/pkg/registry/continuetoken"
	"github.com/example/platform-apiserver/pkg/registry/postgres/pgdb"
	"github.com/example/platform-apiserver/pkg/registry/postgres/replicas"
	"github.com/example/platform-apiserver/pkg/registry/postgres/views"
	"github.com/example/platform-apiserver/pkg/registry/store"
)

// The views' reads are package views'; the store serves them and gives
// them its pools, standbys and continue tokens (viewReader).

// ClusterLabel is the synthetic label every view object carries (the API
// adds it); selectors on it filter the cluster_id column.
const ClusterLabel = views.ClusterLabel

// Source serves the records of view v from s: what a kind's storage reads
// and watches (views.View.Source). A new view needs no method of its own.
func Source[R any](s *Store, v *views.View[R]) store.Source[R] {
	return v.Source(s.viewReader())
}

// NodeCapacities serves NodeCapacity records by object name.
func (s *Store) NodeCapacities() store.Source[store.NodeCapacity] {
	return Source(s, views.NodeCapacity)
}

// GetNodeCapacity returns one node's view.
func (s *Store) GetNodeCapacity(ctx context.Context, clusterID, node string) (*store.NodeCapacity, error) {
	return views.NodeCapacity.Get(ctx, s.viewReader(), store.ListKey{clusterID, node})
}

// ClusterNamespaces serves ClusterNamespace records by namespace and
// object name (the cluster id).
func (s *Store) ClusterNamespaces() store.Source[store.ClusterNamespace] {
	return Source(s, views.ClusterNamespace)
}

// GetClusterNamespace returns the view of namespace in cluster clusterID.
func (s *Store) GetClusterNamespace(ctx context.Context, namespace, clusterID string) (*store.ClusterNamespace, error) {
	return views.ClusterNamespace.Get(ctx, s.viewReader(), store.ListKey{namespace, clusterID})
}

// ClusterCapacities serves ClusterCapacity records by object name, the cluster id.
func (s *Store) ClusterCapacities() store.Source[store.ClusterCapacity] {
	return Source(s, views.ClusterCapacity)
}

// GetClusterCapacity returns one member's capacity view.
func (s *Store) GetClusterCapacity(ctx context.Context, clusterID string) (*store.ClusterCapacity, error) {
	return views.ClusterCapacity.Get(ctx, s.viewReader(), store.ListKey{clusterID, clusterID})
}

// MemberHeartbeats returns every member's mirror heartbeat
// (ClusterCapacity status.mirroring.completeAsOf) by cluster id.
func (s *Store) MemberHeartbeats(ctx context.Context) (map[string]time.Time, error) {
	return views.MemberHeartbeats(ctx, s.viewReader())
}

// Placement answers q in one statement over the node view (views.Placement).
func (s *Store) Placement(ctx context.Context, q store.PlacementQuery) ([]store.MemberFit, error) {
	return views.Placement(ctx, s.viewReader(), q)
}

// viewReader is the store as the views' reads use it (views.Reader).
type viewReader Store

func (s *Store) viewReader() *viewReader { return (*viewReader)(s) }

// Primary is the primary's reads pool.
func (r *viewReader) Primary() *pgdb.Pool { return r.reads }

// ReadTx reads on a standby holding f, or the primary's reads pool (readTx).
func (r *viewReader) ReadTx(ctx context.Context, f store.Freshness, fn func(pgx.Tx) error) error {
	return (*Store)(r).readTx(ctx, f, fn)
}

// Lost reads the recorded failover bounds in tx (replicas.LostVersions.Lost).
func (r *viewReader) Lost(ctx context.Context, tx pgx.Tx, rv int64) (bool, error) {
	ep, err := replicas.ReadLostVersions(ctx, tx)
	if err != nil {
		return false, err
	}
	return ep.Lost(rv), nil
}

// ContinueCodec is the store's continue-token codec (continueCodec).
func (r *viewReader) ContinueCodec(ctx context.Context) (*continuetoken.Codec, error) {
	return (*Store)(r).continueCodec(ctx)
}
