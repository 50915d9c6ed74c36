package writes

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"k8s.io/klog/v2"

	"github.com/example/platform-apiserver/pkg/registry/postgres/pgdb"
	"github.com/example/platform-apiserver/pkg/registry/store"
)

// Writer is one write transaction. It runs in two sections (see
// docs/write-path.md, "The two sections"): row work of one member under
// that member's lock, which writers of other members do not wait for, then
// the view rows under a commit ticket (migration 023): views sections of
// different members run side by side, stamping versions from their
// tickets, and commit in ticket order, so versions are committed in order.
type Writer struct {
	// ctx is the transaction's: a writer lives inside one call of write.
	ctx context.Context //nolint:containedctx // a handle on one transaction, made and dropped by write(ctx)
	tx  pgx.Tx
	// startRV is the base of the writer's ticket (ticket × 2^22): every
	// version this transaction stamps is above it, every version an
	// earlier ticket stamped below it. Zero before the views section.
	startRV int64
	// maxRV is the highest version this transaction stamped.
	maxRV int64
}

var (
	sqlTakeTicket   = statement("write_take_ticket")
	sqlWaitTickets  = statement("write_wait_tickets")
	sqlPublishState = statement("write_publish_state")
	sqlLockMember   = statement("write_lock_member")
	sqlMemberEpoch  = statement("write_member_epoch")
	sqlCountChanges = statement("write_count_changes")
	sqlDeletedMaxRV = statement("write_deleted_max_rv")
)

// Sections are the two parts of a write transaction; either may be nil.
type Sections struct {
	// Member runs first, without a ticket: per-member work on rows
	// that carry no resourceVersion (pods, quotas, cursors), and the
	// member lock and fence check that serialize one member's writers.
	Member func(w *Writer) error
	// Views runs under a commit ticket: every change to a view row.
	Views func(w *Writer) error
	// SkipViews, if set, says after the member section that Views has
	// nothing to do: the write then takes no ticket.
	SkipViews func() bool
}

// Write runs a write transaction: the member section, then a commit ticket
// and the views section, then it waits for the earlier tickets' transactions
// to end and records the highest resourceVersion taken in registry_state
// (at least the ticket's base, so the next writers' waits start past it);
// a writer that stamped nothing usually does neither.
// It measures the wait for the writer's turn (taking the ticket, waiting
// for the earlier ones) and the rest of the time it held its ticket, and
// counts the objects changed.
func (e *Engine) Write(ctx context.Context, o Op, sec Sections) error {
	var ticketed time.Time
	var taking, waiting, viewsTook time.Duration
	var stamped int64
	changed := map[string]int64{}
	err := pgx.BeginFunc(ctx, e.pool, func(tx pgx.Tx) error {
		w := &Writer{ctx: ctx, tx: tx}
		if sec.Member != nil {
			if err := sec.Member(w); err != nil {
				return err
			}
		}
		if sec.Views == nil || sec.SkipViews != nil && sec.SkipViews() {
			return nil
		}
		begin := time.Now()
		if err := tx.QueryRow(ctx, sqlTakeTicket).Scan(&w.startRV); err != nil {
			return fmt.Errorf("take a commit ticket: %w", err)
		}
		ticketed = time.Now()
		taking = ticketed.Sub(begin)
		w.maxRV = w.startRV
		if err := sec.Views(w); err != nil {
			return err
		}
		viewsTook, stamped = time.Since(ticketed), w.maxRV-w.startRV
		if w.maxRV > w.startRV {
			if err := w.countChanges(changed); err != nil {
				return err
			}
		}
		// A writer that stamped nothing neither waits nor publishes,
		// unless the tickets nobody published pile up past unpublishedTickets.
		lag := 0
		if w.maxRV == w.startRV {
			lag = unpublishedTickets
		}
		waitBegin := time.Now()
		var waited bool
		if err := tx.QueryRow(ctx, sqlWaitTickets, lag).Scan(&waited); err != nil {
			return fmt.Errorf("wait for earlier commit tickets: %w", err)
		}
		waiting = time.Since(waitBegin)
		if !waited {
			return nil
		}
		_, err := tx.Exec(ctx, sqlPublishState, w.maxRV, w.startRV)
		return err
	})
	if !ticketed.IsZero() {
		held := time.Since(ticketed) - waiting
		writerLockWait.WithLabelValues(string(o)).Observe((taking + waiting).Seconds())
		writerLockHold.WithLabelValues(string(o)).Observe(held.Seconds())
		if held >= longHold {
			klog.FromContext(ctx).V(2).Info("A write held its commit ticket long; every later writer waited for it",
				"op", o, "held", held, "views", viewsTook, "stamped", stamped, "failed", err != nil)
		}
	}
	if err != nil {
		writeFailures.WithLabelValues(string(o)).Inc()
		return pgdb.InterpretError(err)
	}
	for kind, n := range changed {
		objectsChanged.WithLabelValues(kind).Add(float64(n))
	}
	return nil
}

// longHold is how long a write holds its commit ticket before it is logged
// (at verbosity 2): later writers wait for it.
const longHold = 500 * time.Millisecond

// MemberLockClass is the first key of the advisory locks that serialize the
// writers of one member: (MemberLockClass, hashtext(cluster_id)). Members
// whose ids hash alike share a lock, which only costs concurrency.
const MemberLockClass = 0x706c6174 // "plat"

// unpublishedTickets is how many tickets past the published one a writer
// that stamped nothing may end without waiting and publishing: a write
// that changed nothing rarely waits for the earlier views sections or
// moves the registry's resourceVersion, and the tickets between the
// published one and the next writer's stay few, mostly within the 64 up
// to which its wait locks each rather than read pg_locks (migration 026;
// past 64 it locks only the earlier tickets in flight, so the tickets of
// writers that aborted cost it nothing).
const unpublishedTickets = 32

// ViewRowsPerCommit bounds the view rows one transaction of a write in parts
// stamps: a usage report's due rows (a member's first scrape after its
// nodes synced finds all of them due), the usage expiry's (a member whose
// scrapes stopped has all its nodes expired at once), a relist's
// aggregates (apply_relist.go) and a large batch's namespaces and nodes
// (apply_parts.go). Every later writer waits for a views section before it
// publishes, so its length is what they wait: in the fleet benchmark's
// sync with three replicas, parts of 1,000 rows left a wait p99 of
// 3.9 s, of 250 of 1.3 s and of 125 of 0.95–1.0 s (docs/benchmarks.md,
// runs AN, AS, AT and AZ). Parts of 64 left 0.60–0.90 s but wrote nodes
// a third slower (runs BA and BB).
const ViewRowsPerCommit = 125

// Tx is the writer's transaction.
func (w *Writer) Tx() pgx.Tx { return w.tx }

// StartRV is the base of the writer's ticket in its views section: every
// version it stamps is above it.
func (w *Writer) StartRV() int64 { return w.startRV }

// lockMember takes the member's lock for the rest of the transaction and
// returns its current fence: epoch (0 for a member nobody claimed) and the
// registry's failover count.
func (w *Writer) lockMember(clusterID string) (store.Fence, error) {
	f := store.Fence{ClusterID: clusterID}
	begin := time.Now()
	if _, err := w.tx.Exec(w.ctx, sqlLockMember, MemberLockClass, clusterID); err != nil {
		return f, fmt.Errorf("lock member %s: %w", clusterID, err)
	}
	memberLockWait.Observe(time.Since(begin).Seconds())
	err := w.tx.QueryRow(w.ctx, sqlMemberEpoch, clusterID).Scan(&f.Epoch, &f.Failovers)
	if err != nil {
		return f, fmt.Errorf("read epoch of member %s: %w", clusterID, err)
	}
	return f, nil
}

// Fence takes the member's lock and fails with store.ErrRewound if the
// registry failed over since a fenced writer's claim, else with
// store.ErrFenced unless the write's epoch is still the member's.
func (w *Writer) Fence(f store.Fence) error {
	cur, err := w.lockMember(f.ClusterID)
	if err != nil {
		return err
	}
	if f.Epoch != 0 && cur.Failovers != f.Failovers {
		// Checked first: the failover may have lost the claim itself.
		return fmt.Errorf("%w: member %s was claimed after failover %d, the registry is at failover %d", store.ErrRewound, f.ClusterID, f.Failovers, cur.Failovers)
	}
	if epoch := cur.Epoch; epoch != f.Epoch {
		return fmt.Errorf("%w: member %s is at epoch %d, the write carries %d", store.ErrFenced, f.ClusterID, epoch, f.Epoch)
	}
	return nil
}

// countChanges counts this transaction's change-feed entries by kind: a
// short primary-key range, every entry above the start version.
func (w *Writer) countChanges(into map[string]int64) error {
	rows, err := w.tx.Query(w.ctx, sqlCountChanges, w.startRV)
	if err != nil {
		return fmt.Errorf("count changes: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var kind string
		var n int64
		if err := rows.Scan(&kind, &n); err != nil {
			return err
		}
		into[kind] = n
	}
	return rows.Err()
}

// Stamp runs a statement that returns the highest resource_version it
// assigned (0 if none) and remembers it.
func (w *Writer) Stamp(what, sql string, args ...any) error {
	var rv int64
	if err := w.tx.QueryRow(w.ctx, sql, args...).Scan(&rv); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	w.maxRV = max(w.maxRV, rv)
	return nil
}

// StampCounted runs a statement that returns how many rows it stamped and
// the highest resource_version it assigned (0 if none), and remembers the
// latter.
func (w *Writer) StampCounted(what, sql string, args ...any) (int64, error) {
	var n, rv int64
	if err := w.tx.QueryRow(w.ctx, sql, args...).Scan(&n, &rv); err != nil {
		return 0, fmt.Errorf("%s: %w", what, err)
	}
	w.maxRV = max(w.maxRV, rv)
	return n, nil
}

// deleteViewRows runs a DELETE of view rows (cluster_node,
// cluster_namespace). The change-log trigger gives each deleted row the
// version of its tombstone (migration 002); this reads the highest back.
func (w *Writer) deleteViewRows(what, sql string, args ...any) error {
	tag, err := w.tx.Exec(w.ctx, sql, args...)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if tag.RowsAffected() == 0 {
		return nil
	}
	return w.Stamp(what, sqlDeletedMaxRV, w.startRV)
}

// pairs is a set of (cluster, name) keys, e.g. nodes whose aggregates to recompute.
type pairs map[[2]string]struct{}

func (p pairs) add(cluster, name string) {
	if name != "" {
		p[[2]string{cluster, name}] = struct{}{}
	}
}

// pairRow is a (cluster, name) key in a statement's jsonb parameter.
type pairRow struct {
	ClusterID string `json:"cluster_id"`
	Name      string `json:"name"`
}

// rows returns the keys as rows for JSONRows.
func (p pairs) rows() []pairRow {
	out := make([]pairRow, 0, len(p))
	for k := range p {
		out = append(out, pairRow{ClusterID: k[0], Name: k[1]})
	}
	return out
}
