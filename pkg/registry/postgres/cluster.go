package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/example/platform-apiserver/pkg/registry/store"
)

var (
	sqlCursor                  = statement("cluster_cursor")
	sqlClaimMember             = statement("cluster_claim_member")
	sqlDeleteMemberRows        = statement("cluster_delete_member_rows")
	sqlDeleteClusterNamespaces = statement("cluster_delete_namespaces")
	sqlDeleteClusterNodes      = statement("cluster_delete_nodes")
	sqlDeleteClusterCapacity   = statement("cluster_delete_capacity")
	sqlClusters                = statement("cluster_list")
	sqlMemberIdentity          = statement("cluster_member_identity")
	sqlDropCursors             = statement("cluster_drop_cursors")
	sqlRecordIdentity          = statement("cluster_record_identity")
)

// Cursor returns the persisted member resourceVersion for a resource, "" if none.
func (s *Store) Cursor(ctx context.Context, clusterID string, r store.Resource) (string, error) {
	var rv string
	err := s.writes.QueryRow(ctx, sqlCursor, clusterID, string(r)).Scan(&rv)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read cursor %s/%s: %w", clusterID, r, interpretError(err))
	}
	return rv, nil
}

// ClaimMember gives the member a fresh epoch from discovery_member_epoch
// under the member's lock, so it waits for a write in flight and every later
// write carrying an older epoch fails with store.ErrFenced.
func (s *Store) ClaimMember(ctx context.Context, clusterID, owner string) (store.Fence, error) {
	var f store.Fence
	err := pgx.BeginFunc(ctx, s.writes, func(tx pgx.Tx) error {
		w := &writer{ctx: ctx, tx: tx}
		var err error
		if f, err = w.lockMember(clusterID); err != nil {
			return err
		}
		return tx.QueryRow(ctx, sqlClaimMember, clusterID, owner).Scan(&f.Epoch)
	})
	if err != nil {
		return f, fmt.Errorf("claim member %s: %w", clusterID, interpretError(err))
	}
	return f, nil
}

// DeleteCluster removes every row of a member cluster in one transaction;
// each removed view row takes a resourceVersion, its tombstone's. Its
// discovery_member row goes too, which fences out its owner: epochs are
// never reused, and a member without a row is at epoch 0.
func (s *Store) DeleteCluster(ctx context.Context, clusterID string) error {
	err := s.write(ctx, opDeleteCluster, sections{
		member: func(w *writer) error {
			if _, err := w.lockMember(clusterID); err != nil {
				return err
			}
			if _, err := w.tx.Exec(ctx, sqlDeleteMemberRows, clusterID); err != nil {
				return fmt.Errorf("delete member rows: %w", err)
			}
			return nil
		},
		views: func(w *writer) error {
			// The capacity first: its node and namespace triggers then find
			// no row to update, and its tombstone is its last state.
			if err := w.deleteViewRows("delete cluster_capacity", sqlDeleteClusterCapacity, clusterID); err != nil {
				return err
			}
			if err := w.deleteViewRows("delete cluster_namespace", sqlDeleteClusterNamespaces, clusterID); err != nil {
				return err
			}
			return w.deleteViewRows("delete cluster_node", sqlDeleteClusterNodes, clusterID)
		},
	})
	if err != nil {
		return fmt.Errorf("delete cluster %s: %w", clusterID, err)
	}
	return nil
}

// Clusters returns the ids of every member cluster with rows in any table
// but the metrics history, which holds samples of known nodes only, goes
// with them, and would cost a scan of a day of samples.
func (s *Store) Clusters(ctx context.Context) ([]string, error) {
	rows, err := s.writes.Query(ctx, sqlClusters)
	if err != nil {
		return nil, fmt.Errorf("list clusters: %w", interpretError(err))
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("list clusters: %w", interpretError(err))
	}
	return ids, nil
}

// CheckMemberIdentity records a member's identity and drops its cursors when
// it differs from the recorded one, fenced like a write. Cursors are not
// views: no writer lock.
func (s *Store) CheckMemberIdentity(ctx context.Context, f store.Fence, identity string) (bool, error) {
	var changed bool
	err := pgx.BeginFunc(ctx, s.writes, func(tx pgx.Tx) error {
		w := &writer{ctx: ctx, tx: tx}
		if err := w.fence(f); err != nil {
			return err
		}
		var previous *string
		err := tx.QueryRow(ctx, sqlMemberIdentity, f.ClusterID).Scan(&previous)
		switch {
		case errors.Is(err, pgx.ErrNoRows), err == nil && previous == nil:
			// First seen with an identity: cursors from before identities
			// were recorded are trusted.
		case err != nil:
			return err
		case *previous == identity:
			return nil
		default:
			changed = true
			if _, err := tx.Exec(ctx, sqlDropCursors, f.ClusterID); err != nil {
				return err
			}
		}
		_, err = tx.Exec(ctx, sqlRecordIdentity, f.ClusterID, identity)
		return err
	})
	if err != nil {
		return false, fmt.Errorf("check identity of member %s: %w", f.ClusterID, interpretError(err))
	}
	return changed, nil
}
