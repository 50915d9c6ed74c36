package writes

import (
	"context"
	"slices"

	"github.com/example/platform-apiserver/pkg/registry/store"
)

// A batch of more namespaces and nodes than ViewRowsPerCommit (a relist's
// chunk or last batch of 500 nodes, a large watch batch) commits in parts:
// the view rows beyond its last ViewRowsPerCommit first, ViewRowsPerCommit
// a transaction, each part a batch of its own: no member rows, no
// deletions, no cursors. The batch then commits with what is left: its
// member rows, deletions, Replace (the parts' rows join Present) and
// cursors. So no views section of a batch stamps more than
// ViewRowsPerCommit namespaces and nodes of its own, as no write in parts
// does (write.go); what every later writer waits for is that long.
//
// Until the cursors commit, the batch is not done: after a failure
// discovery lists or watches again from the cursor before it, and the
// parts' rows, written again, are unchanged and take no ticket. Between
// the transactions a reader sees some of the batch's rows newer than the
// others, as it sees a member's resources at different points anyway.

// applyInParts commits b, its view rows beyond the last ViewRowsPerCommit
// first, in parts.
func (e *Engine) applyInParts(ctx context.Context, b store.Batch) error {
	parts, rest := splitParts(b)
	for _, p := range parts {
		if err := e.Write(ctx, opApply, newApplier(p).sections()); err != nil {
			return err
		}
	}
	return e.Write(ctx, opApply, newApplier(rest).sections())
}

// splitParts splits the parts that commit before b, batches of at most
// ViewRowsPerCommit namespaces or nodes each, off b, and returns them and
// what is left of b.
// Rows b also deletes stay with it (they are deleted, then written again),
// and so do the last ViewRowsPerCommit of the others.
func splitParts(b store.Batch) (parts []store.Batch, rest store.Batch) {
	nss, pinnedNss := unpinned(b.Namespaces, b.Deleted[store.ResourceNamespaces], func(n store.Namespace) string { return n.Name })
	nodes, pinnedNodes := unpinned(b.Nodes, b.Deleted[store.ResourceNodes], func(n store.Node) string { return n.Name })
	n := len(nss) + len(nodes) - ViewRowsPerCommit
	if n <= 0 {
		return nil, b
	}
	partNss, partNodes := nss[:min(n, len(nss))], nodes[:n-min(n, len(nss))]
	// A part is no chunk (Batch.Chunk: more batches of a relist follow); it
	// has no member rows, whose aggregates a chunk leaves to the relist.
	part := func() store.Batch {
		return store.Batch{ClusterID: b.ClusterID, Epoch: b.Epoch, Failovers: b.Failovers}
	}
	for rows := range slices.Chunk(partNss, ViewRowsPerCommit) {
		p := part()
		p.Namespaces = rows
		parts = append(parts, p)
	}
	for rows := range slices.Chunk(partNodes, ViewRowsPerCommit) {
		p := part()
		p.Nodes = rows
		parts = append(parts, p)
	}
	rest = b
	rest.Namespaces = slices.Concat(nss[len(partNss):], pinnedNss)
	rest.Nodes = slices.Concat(nodes[len(partNodes):], pinnedNodes)
	rest.Present = slices.Clone(b.Present)
	for _, r := range b.Replace {
		if t, ok := memberTableOf(r); ok {
			for i := range parts {
				rest.Present = append(rest.Present, t.keys(&parts[i])...)
			}
		}
	}
	return parts, rest
}

// unpinned returns the last record of each name, those whose names are not
// in deleted first, then those that are.
func unpinned[T any](records []T, deleted []store.ObjectKey, name func(T) string) (free, pinned []T) {
	gone := make(map[string]bool, len(deleted))
	for _, k := range deleted {
		gone[k.Name] = true
	}
	for _, r := range lastByKey(records, name) {
		if gone[name(r)] {
			pinned = append(pinned, r)
		} else {
			free = append(free, r)
		}
	}
	return free, pinned
}
