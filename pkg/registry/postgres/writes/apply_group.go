package writes

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/example/platform-apiserver/pkg/registry/postgres/pgdb"
	"github.com/example/platform-apiserver/pkg/registry/store"
)

// Group commit: concurrent Apply calls of different members are committed
// together, several batches (one per member) to a transaction, so a
// commit ticket is taken, registry_state raised and the transaction
// committed once for all of them instead of once each. Each
// batch's member section runs in a savepoint: one that fails (fenced, say)
// is rolled back alone and its caller gets its error. A failure after that
// (a views section, the commit) fails the group, whose batches are then
// applied one by one, so one bad batch cannot fail the others'.
//
// No batch waits for a group to fill: a caller whose batch finds a
// committer slot free commits every batch queued at that moment (its own
// among them); batches arriving meanwhile form the next group. Under load
// groups grow by themselves; idle, every group is one batch. Large batches
// (a relist's) commit alone, without waiting for a committer.
const (
	// maxCommitters bounds the groups of small batches of one Store in
	// flight: their member sections run concurrently, their views Sections
	// commit in ticket order. Batches queue, and so group, only when
	// all are busy.
	maxCommitters = 4
	// maxGroup bounds the batches of one group, and so the member locks it
	// holds while it waits for earlier tickets.
	maxGroup = 16
)

// applyQueue holds the batches waiting for a committer.
type applyQueue struct {
	mu      sync.Mutex
	cond    *sync.Cond
	pending []*queuedApply
	running int // committers of small batches in flight
	// busy are the members of the groups in flight: a group that took a
	// member's next batch would wait for that member's lock, held by the
	// other group, with the locks of all its own members.
	busy map[string]bool
}

// queuedApply is one Apply call's batch and, once done, its result.
type queuedApply struct {
	ctx  context.Context //nolint:containedctx // the caller's, for the group transaction's deadline
	b    store.Batch
	err  error
	done bool
}

func (q *applyQueue) init() { q.cond, q.busy = sync.NewCond(&q.mu), map[string]bool{} }

// apply queues b and returns once a group holding it committed or failed.
func (e *Engine) apply(ctx context.Context, b store.Batch) error {
	a := &e.applies
	item := &queuedApply{ctx: ctx, b: b}
	stop := context.AfterFunc(ctx, func() {
		a.mu.Lock()
		a.cond.Broadcast()
		a.mu.Unlock()
	})
	defer stop()
	a.mu.Lock()
	defer a.mu.Unlock()
	a.pending = append(a.pending, item)
	for !item.done {
		if i := slices.Index(a.pending, item); i >= 0 && ctx.Err() != nil {
			a.pending = slices.Delete(a.pending, i, i+1)
			return ctx.Err()
		}
		if group, slot := a.takeLocked(); len(group) > 0 {
			if slot {
				a.running++
			}
			a.mu.Unlock()
			e.commitGroup(group)
			a.mu.Lock()
			if slot {
				a.running--
			}
			for _, g := range group {
				g.done = true
				delete(a.busy, g.b.ClusterID)
			}
			a.cond.Broadcast()
			continue
		}
		a.cond.Wait()
	}
	return item.err
}

// takeLocked takes the next group off the queue: a large batch alone (it
// needs no committer slot: relists commit concurrently, as they would
// without grouping), or, if a committer slot is free, the first small
// batches, one per member. Neither takes a batch of a member that a group
// in flight holds: the member section of each batch is exact only because
// no other write of the member's rows comes between it and the batch's
// views section, and the group would wait for the other's member lock with
// all of its own. slot reports whether the group took a committer slot.
func (a *applyQueue) takeLocked() (group []*queuedApply, slot bool) {
	for i, q := range a.pending {
		if !a.busy[q.b.ClusterID] && large(&q.b) {
			a.busy[q.b.ClusterID] = true
			a.pending = slices.Delete(a.pending, i, i+1)
			return []*queuedApply{q}, false
		}
	}
	if a.running >= maxCommitters {
		return nil, false
	}
	var rest []*queuedApply
	for _, q := range a.pending {
		if len(group) >= maxGroup || a.busy[q.b.ClusterID] || large(&q.b) {
			rest = append(rest, q)
			continue
		}
		a.busy[q.b.ClusterID] = true
		group = append(group, q)
	}
	a.pending = rest
	return group, len(group) > 0
}

// groupedObjects is the most objects a batch grouped with others holds.
// Grouping saves a transaction's fixed cost, which matters for the small
// batches of a steady fleet; a relist's chunks and last batches are work
// in proportion to their rows, and grouped they only make one long views
// section out of several (the fleet benchmark's sync took 27 %
// longer with them grouped, and 48 % with them waiting for the 4
// committers).
const groupedObjects = 100

// large reports whether b commits alone: a relist's last batch, or more
// than groupedObjects objects.
func large(b *store.Batch) bool {
	n := len(b.Namespaces) + len(b.Nodes) + len(b.Pods) + len(b.Quotas) + len(b.Slices) + len(b.Claims)
	for _, keys := range b.Deleted {
		n += len(keys)
	}
	return len(b.Replace) > 0 || len(b.Unserved) > 0 || n > groupedObjects
}

// commitGroup commits the group's batches in one transaction, or, if that
// fails as a whole, each in its own; it sets each batch's err.
func (e *Engine) commitGroup(group []*queuedApply) {
	if len(group) == 1 {
		e.applyAlone(group[0])
		return
	}
	// Member locks in one order, so two groups cannot wait for each other.
	slices.SortStableFunc(group, func(x, y *queuedApply) int { return cmp.Compare(x.b.ClusterID, y.b.ClusterID) })
	ctx, cancel := groupContext(group)
	defer cancel()
	applied := make([]Sections, len(group))
	for i, q := range group {
		applied[i] = newApplier(q.b).sections()
	}
	failed := make([]error, len(group)) // member sections rolled back
	err := e.Write(ctx, opApply, Sections{
		Member: func(w *Writer) error {
			for i := range group {
				failed[i] = inSavepoint(w, applied[i].Member)
				if failed[i] != nil && !isBatchError(failed[i]) {
					return failed[i] // the transaction cannot go on
				}
			}
			return nil
		},
		SkipViews: func() bool {
			for i := range group {
				if failed[i] == nil && !applied[i].SkipViews() {
					return false
				}
			}
			return true
		},
		Views: func(w *Writer) error {
			for i := range group {
				if failed[i] == nil && !applied[i].SkipViews() {
					if err := applied[i].Views(w); err != nil {
						return err
					}
				}
			}
			return nil
		},
	})
	if err != nil {
		// One by one, each with its own context again.
		for _, q := range group {
			e.applyAlone(q)
		}
		return
	}
	for i, q := range group {
		if failed[i] != nil {
			writeFailures.WithLabelValues(string(opApply)).Inc()
			q.err = pgdb.InterpretError(failed[i])
		}
	}
}

// applyAlone commits one batch in a transaction of its own, after its view
// rows beyond ViewRowsPerCommit in parts (apply_parts.go), or a relist's last batch of
// member rows in its steps (apply_relist.go).
func (e *Engine) applyAlone(q *queuedApply) {
	if relistsMemberRows(&q.b) {
		q.err = e.applyRelist(q.ctx, q.b)
		return
	}
	q.err = e.applyInParts(q.ctx, q.b)
}

// inSavepoint runs a member section in a savepoint and rolls it back if it
// fails.
func inSavepoint(w *Writer, member func(*Writer) error) error {
	sp, err := w.tx.Begin(w.ctx)
	if err != nil {
		return err
	}
	inner := *w
	inner.tx = sp
	if err := member(&inner); err != nil {
		if rbErr := sp.Rollback(w.ctx); rbErr != nil {
			return errors.Join(err, rbErr)
		}
		return batchError{err}
	}
	return sp.Commit(w.ctx)
}

// batchError is a member section's failure, rolled back to its savepoint:
// the group goes on without that batch.
type batchError struct{ error }

func (e batchError) Unwrap() error { return e.error }

func isBatchError(err error) bool {
	var be batchError
	return errors.As(err, &be)
}

// groupContext is the group transaction's context: done when every
// batch's caller has given up, and at the earliest of their deadlines.
func groupContext(group []*queuedApply) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	var deadline time.Time
	for _, q := range group {
		if d, ok := q.ctx.Deadline(); ok && (deadline.IsZero() || d.Before(deadline)) {
			deadline = d
		}
	}
	if !deadline.IsZero() {
		var cancelDeadline context.CancelFunc
		ctx, cancelDeadline = context.WithDeadline(ctx, deadline)
		prev := cancel
		cancel = func() { cancelDeadline(); prev() }
	}
	var waiting atomic.Int64
	waiting.Store(int64(len(group)))
	stops := make([]func() bool, len(group))
	for i, q := range group {
		stops[i] = context.AfterFunc(q.ctx, func() {
			if waiting.Add(-1) == 0 {
				cancel()
			}
		})
	}
	return ctx, func() {
		for _, stop := range stops {
			stop()
		}
		cancel()
	}
}
