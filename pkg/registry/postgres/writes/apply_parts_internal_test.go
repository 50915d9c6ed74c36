package writes

import (
	"fmt"
	"slices"
	"testing"

	"github.com/example/platform-apiserver/pkg/registry/store"
)

// TestSplitParts: a batch's namespaces and nodes beyond its last
// ViewRowsPerCommit go first, in parts of at most ViewRowsPerCommit, each a
// batch without member rows, deletions or cursors (and no chunk: no relist
// batch follows because of it); rows the batch deletes and a name's last
// record stay with it; a Replace sees the parts' rows in Present.
func TestSplitParts(t *testing.T) {
	t.Parallel()
	small := store.Batch{ClusterID: "c", Nodes: nodesNamed(ViewRowsPerCommit)}
	if parts, rest := splitParts(small); len(parts) != 0 || len(rest.Nodes) != ViewRowsPerCommit {
		t.Errorf("a batch of %d nodes: %d parts, %d left; want it whole", ViewRowsPerCommit, len(parts), len(rest.Nodes))
	}

	nodes := nodesNamed(2*ViewRowsPerCommit + 10)
	nodes = append(nodes, store.Node{Name: "n0000", UID: "last"}) // n0000 again: the last record wins
	b := store.Batch{ClusterID: "c", Epoch: 3, Failovers: 1, Nodes: nodes,
		Namespaces: []store.Namespace{{Name: "a"}, {Name: "gone"}},
		Pods:       []store.Pod{{Namespace: "a", Name: "p"}},
		Deleted:    store.Keys{store.ResourceNamespaces: {{Name: "gone"}}},
		Replace:    []store.Resource{store.ResourceNodes},
		Present:    []store.ObjectKey{{Name: "earlier"}},
		Cursors:    map[store.Resource]string{store.ResourceNodes: "9"},
	}
	parts, rest := splitParts(b)
	var inParts []string
	for i, p := range parts {
		if p.Chunk || p.ClusterID != "c" || p.Epoch != 3 || p.Failovers != 1 || len(p.Pods)+len(p.Deleted)+len(p.Cursors)+len(p.Replace)+len(p.Present) != 0 {
			t.Errorf("part %d is not a fenced batch of view rows only: %+v", i, p)
		}
		if n := len(p.Namespaces) + len(p.Nodes); n == 0 || n > ViewRowsPerCommit {
			t.Errorf("part %d has %d view rows, want 1 to %d", i, n, ViewRowsPerCommit)
		}
		for _, ns := range p.Namespaces {
			inParts = append(inParts, "ns/"+ns.Name)
		}
		for _, nd := range p.Nodes {
			inParts = append(inParts, nd.Name)
			if nd.Name == "n0000" && nd.UID != "last" {
				t.Errorf("n0000 in a part with its first record, want its last")
			}
		}
	}
	if slices.Contains(inParts, "ns/gone") {
		t.Errorf("the namespace the batch deletes went in a part; it must stay with the deletion")
	}
	if got := len(rest.Namespaces) + len(rest.Nodes); got > ViewRowsPerCommit+1 {
		t.Errorf("%d view rows left, want the last %d and the one deleted", got, ViewRowsPerCommit)
	}
	if len(inParts)+len(rest.Namespaces)+len(rest.Nodes) != 2*ViewRowsPerCommit+12 {
		t.Errorf("%d in parts and %d left, want every one of the %d names once", len(inParts), len(rest.Namespaces)+len(rest.Nodes), 2*ViewRowsPerCommit+12)
	}
	present := map[string]bool{}
	for _, k := range rest.Present {
		present[k.Name] = true
	}
	if !present["earlier"] {
		t.Errorf("the batch's own Present was dropped")
	}
	for _, name := range inParts {
		if len(name) > 3 && name[:3] == "ns/" {
			if present[name[3:]] {
				t.Errorf("namespace %s is in Present, but the batch replaces nodes only", name[3:])
			}
			continue
		}
		if !present[name] {
			t.Errorf("node %s of a part is not in Present: the relist would delete it", name)
		}
	}
	if len(rest.Pods) != 1 || rest.Cursors[store.ResourceNodes] != "9" || len(rest.Deleted) != 1 || rest.Chunk {
		t.Errorf("what is left lost the batch's member rows, cursors, deletions or kind: %+v", rest)
	}
	if len(b.Present) != 1 {
		t.Errorf("splitParts changed the caller's Present")
	}
}

func nodesNamed(n int) []store.Node {
	out := make([]store.Node, n)
	for i := range out {
		out[i] = store.Node{Name: fmt.Sprintf("n%04d", i)}
	}
	return out
}
