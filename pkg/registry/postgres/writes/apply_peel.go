package writes

import (
	"context"
	"slices"

	"github.com/example/platform-apiserver/pkg/registry/store"
)

// A batch of more namespaces and nodes than ViewSlice (a relist's chunk or
// last batch of 500 nodes, a large watch batch) commits the view rows
// beyond its last ViewSlice first, ViewSlice a transaction, as chunks of
// their own: no member rows, no deletions, no cursors. The batch then
// commits with what is left: its member rows, deletions, Replace (the
// peeled rows join Present) and cursors. So no views section of a batch
// stamps more than ViewSlice namespaces and nodes of its own, as no write in
// slices does (write.go); what every later writer waits for is that long.
//
// Until the cursors commit, the batch is not done: after a failure
// discovery lists or watches again from the cursor before it, and the
// peeled rows, written again, are unchanged and take no ticket. Between
// the transactions a reader sees some of the batch's rows newer than the
// others, as it sees a member's resources at different points anyway.

// applyPeeled commits b, its view rows beyond the last ViewSlice first.
func (e *Engine) applyPeeled(ctx context.Context, b store.Batch) error {
	first, rest := peel(b)
	for _, p := range first {
		if err := e.Write(ctx, opApply, newApplier(p).sections()); err != nil {
			return err
		}
	}
	return e.Write(ctx, opApply, newApplier(rest).sections())
}

// peel splits the batches that commit before b, at most ViewSlice
// namespaces or nodes each, off b, and returns them and what is left of b.
// Rows b also deletes stay with it (they are deleted, then written again),
// and so do the last ViewSlice of the others.
func peel(b store.Batch) (first []store.Batch, rest store.Batch) {
	nss, pinnedNss := unpinned(b.Namespaces, b.Deleted[store.ResourceNamespaces], func(n store.Namespace) string { return n.Name })
	nodes, pinnedNodes := unpinned(b.Nodes, b.Deleted[store.ResourceNodes], func(n store.Node) string { return n.Name })
	n := len(nss) + len(nodes) - ViewSlice
	if n <= 0 {
		return nil, b
	}
	peelNss, peelNodes := nss[:min(n, len(nss))], nodes[:n-min(n, len(nss))]
	chunk := func() store.Batch {
		return store.Batch{ClusterID: b.ClusterID, Epoch: b.Epoch, Failovers: b.Failovers, Chunk: true}
	}
	for part := range slices.Chunk(peelNss, ViewSlice) {
		c := chunk()
		c.Namespaces = part
		first = append(first, c)
	}
	for part := range slices.Chunk(peelNodes, ViewSlice) {
		c := chunk()
		c.Nodes = part
		first = append(first, c)
	}
	rest = b
	rest.Namespaces = slices.Concat(nss[len(peelNss):], pinnedNss)
	rest.Nodes = slices.Concat(nodes[len(peelNodes):], pinnedNodes)
	rest.Present = slices.Clone(b.Present)
	for _, r := range b.Replace {
		if t, ok := memberTableOf(r); ok {
			for i := range first {
				rest.Present = append(rest.Present, t.keys(&first[i])...)
			}
		}
	}
	return first, rest
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
