package writes

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/example/platform-apiserver/pkg/registry/postgres/views"
	"github.com/example/platform-apiserver/pkg/registry/store"
)

// A relist's last batch of member rows (pods, quotas, DRA: Replace) commits
// in three steps, so no transaction holds a commit ticket for every node
// and namespace of the member at once (the fleet benchmark's 4,005
// namespaces a member were one views section, the longest any writer
// waited for):
//
//  1. the batch as a chunk: its rows, and the deletions Replace finds, but
//     not the aggregates its member rows move, nor the cursor;
//  2. the aggregates of every node and namespace of the member, computed
//     again and stamped where they differ, at most ViewRowsPerCommit rows a
//     transaction (a relist's chunks, and those of an earlier relist that
//     never reached its last batch, left theirs to it);
//  3. the cursor.
//
// Until the third commits, a restart lists again and redoes the second; the
// views are exact after it, as they were after the one transaction before.
// Each node and namespace is stamped once, however many batches moved it.

// relistsMemberRows reports whether b is a relist's last batch of member
// rows, applied in steps (applyRelist).
func relistsMemberRows(b *store.Batch) bool {
	return !b.Chunk && slices.ContainsFunc(b.Replace, isMemberRows)
}

// applyRelist applies a relist's last batch of member rows in its three
// steps.
func (e *Engine) applyRelist(ctx context.Context, b store.Batch) error {
	rows := b
	rows.Chunk, rows.Cursors = true, nil
	if err := e.applyInParts(ctx, rows); err != nil {
		return err
	}
	f := store.Fence{ClusterID: b.ClusterID, Epoch: b.Epoch, Failovers: b.Failovers}
	if err := e.restampAggregates(ctx, f); err != nil {
		return err
	}
	if len(b.Cursors) == 0 {
		return nil
	}
	cursors := store.Batch{ClusterID: b.ClusterID, Epoch: b.Epoch, Failovers: b.Failovers, Cursors: b.Cursors}
	return e.Write(ctx, opApply, newApplier(cursors).sections())
}

// restampAggregates computes again the aggregates of every node and
// namespace of member f.ClusterID and stamps those that differ, ViewRowsPerCommit
// rows a transaction, each fenced by f under the member's lock. A node or
// namespace created meanwhile got its aggregates with its row.
func (e *Engine) restampAggregates(ctx context.Context, f store.Fence) error {
	// Listed, then keyed like any batch's rows: with the member's rows as
	// a subquery the planner hashed every pod of the registry (4.5 s
	// against 73 ms for a 1,000-node batch of the fleet benchmark).
	nodes, namespaces := pairs{}, pairs{}
	if err := memberRows(ctx, e.pool, f.ClusterID, nodes, namespaces); err != nil {
		return err
	}
	for _, v := range []struct {
		what, sql, stampSQL string
		keys                pairs
	}{
		{"node aggregates", sqlAggregateNodes, views.NodeCapacity.StampSQL(), nodes},
		{"namespace aggregates", sqlAggregateNamespaces, views.ClusterNamespace.StampSQL(), namespaces},
	} {
		keys := v.keys.rows()
		slices.SortFunc(keys, func(a, b pairRow) int { return cmp.Compare(a.Name, b.Name) })
		for part := range slices.Chunk(keys, ViewRowsPerCommit) {
			var computed aggregates
			err := e.Write(ctx, opRelistAggregates, Sections{
				Member: func(w *Writer) (err error) {
					if err := w.Fence(f); err != nil {
						return err
					}
					computed, err = w.aggregateRows(v.what, v.sql, v.stampSQL, part, []string{})
					return err
				},
				SkipViews: func() bool { return computed.n == 0 },
				Views:     func(w *Writer) error { return w.stampAggregates(computed) },
			})
			if err != nil {
				return fmt.Errorf("restamp the %s of member %s: %w", v.what, f.ClusterID, err)
			}
		}
	}
	return nil
}
