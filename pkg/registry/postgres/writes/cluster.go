package writes

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/example/platform-apiserver/pkg/registry/postgres/pgdb"
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
	sqlClaimQuotaScopes        = statement("cluster_claim_quota_scopes")
	sqlRecordIdentity          = statement("cluster_record_identity")
	sqlReconcileMembers        = statement("member_reconcile")
	sqlRemoveMember            = statement("member_remove")
)

// Cursor returns the persisted member resourceVersion for a resource, "" if none.
func (e *Engine) Cursor(ctx context.Context, clusterID string, r store.Resource) (string, error) {
	var rv string
	err := e.pool.QueryRow(ctx, sqlCursor, clusterID, string(r)).Scan(&rv)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read cursor %s/%s: %w", clusterID, r, pgdb.InterpretError(err))
	}
	return rv, nil
}

// ClaimMember gives the member a fresh epoch from discovery_member_epoch
// under the member's lock, so it waits for a write in flight and every later
// write carrying an older epoch fails with store.ErrFenced. A removed member
// is refused (store.ErrMemberRemoved). A member whose quotas' scopes are
// not all recorded (mirrored before migration 030) loses its resourcequotas
// cursor in the claim, so its new owner relists them
// (cluster_claim_quota_scopes.sql).
func (e *Engine) ClaimMember(ctx context.Context, clusterID, owner string) (store.Fence, error) {
	var f store.Fence
	err := pgx.BeginFunc(ctx, e.pool, func(tx pgx.Tx) error {
		w := &Writer{ctx: ctx, tx: tx}
		var err error
		if f, err = w.lockMember(clusterID); err != nil {
			return err
		}
		err = tx.QueryRow(ctx, sqlClaimMember, clusterID, owner).Scan(&f.Epoch)
		if errors.Is(err, pgx.ErrNoRows) {
			return store.ErrMemberRemoved
		}
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, sqlClaimQuotaScopes, clusterID)
		return err
	})
	if err != nil {
		return f, fmt.Errorf("claim member %s: %w", clusterID, pgdb.InterpretError(err))
	}
	return f, nil
}

// ReconcileMembers records a replica's view of the members in one
// statement, then removes each due one in a transaction of its own
// (removeMember). Replicas that find the same member due race for its lock;
// the first removes it, the others find it removed.
func (e *Engine) ReconcileMembers(ctx context.Context, v store.MembersView) (store.MembersReconciled, error) {
	out := store.MembersReconciled{Absent: map[string]time.Time{}}
	rows, err := e.pool.Query(ctx, sqlReconcileMembers, v.Configured, v.Listed, v.Unconfigured, v.Grace.Seconds())
	if err != nil {
		return out, fmt.Errorf("reconcile members: %w", pgdb.InterpretError(err))
	}
	var due []string
	for rows.Next() {
		var id string
		var since *time.Time
		var removed, isDue bool
		if err := rows.Scan(&id, &since, &removed, &isDue); err != nil {
			rows.Close()
			return out, fmt.Errorf("reconcile members: %w", pgdb.InterpretError(err))
		}
		switch {
		case removed:
			out.Removed = append(out.Removed, id)
		case isDue:
			due = append(due, id)
		case since != nil:
			out.Absent[id] = *since
		}
	}
	if err := rows.Err(); err != nil {
		return out, fmt.Errorf("reconcile members: %w", pgdb.InterpretError(err))
	}
	for _, id := range due {
		removed, err := e.removeMember(ctx, id, v.Grace)
		if err != nil {
			return out, err
		}
		out.Removed = append(out.Removed, id)
		if removed {
			out.RemovedNow = append(out.RemovedNow, id)
		}
	}
	return out, nil
}

// removeMember removes a member absent for the grace period, unless
// another transaction did: under the member's lock (a claim waits, then is
// refused) it records the removal and renews the epoch (the owner's writes
// are fenced), deletes its pods, quotas and cursors, and then, under a
// commit ticket, its view rows, each with a tombstone version. It reports
// whether it removed the member.
func (e *Engine) removeMember(ctx context.Context, clusterID string, grace time.Duration) (bool, error) {
	var removed bool
	err := e.Write(ctx, opRemoveMember, Sections{
		Member: func(w *Writer) error {
			if _, err := w.lockMember(clusterID); err != nil {
				return err
			}
			tag, err := w.tx.Exec(ctx, sqlRemoveMember, clusterID, grace.Seconds())
			if err != nil {
				return fmt.Errorf("record the removal: %w", err)
			}
			if removed = tag.RowsAffected() == 1; !removed {
				return nil
			}
			if _, err := w.tx.Exec(ctx, sqlDeleteMemberRows, clusterID); err != nil {
				return fmt.Errorf("delete member rows: %w", err)
			}
			return nil
		},
		Views: func(w *Writer) error {
			if !removed {
				return nil
			}
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
		return false, fmt.Errorf("remove member %s: %w", clusterID, err)
	}
	return removed, nil
}

// Clusters returns the ids of every member cluster not removed with rows
// in any table but the metrics history, which holds samples of known nodes
// only, stays after a removal, and would cost a scan of a day of samples.
func (e *Engine) Clusters(ctx context.Context) ([]string, error) {
	rows, err := e.pool.Query(ctx, sqlClusters)
	if err != nil {
		return nil, fmt.Errorf("list clusters: %w", pgdb.InterpretError(err))
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("list clusters: %w", pgdb.InterpretError(err))
	}
	return ids, nil
}

// CheckMemberIdentity records a member's identity and drops its cursors when
// it differs from the recorded one, fenced like a write. Cursors are not
// views: no commit ticket.
func (e *Engine) CheckMemberIdentity(ctx context.Context, f store.Fence, identity string) (bool, error) {
	var changed bool
	err := pgx.BeginFunc(ctx, e.pool, func(tx pgx.Tx) error {
		w := &Writer{ctx: ctx, tx: tx}
		if err := w.Fence(f); err != nil {
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
		return false, fmt.Errorf("check identity of member %s: %w", f.ClusterID, pgdb.InterpretError(err))
	}
	return changed, nil
}
