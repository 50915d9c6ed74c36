package writes

import (
	"fmt"
	"slices"
	"testing"

	"github.com/example/platform-apiserver/pkg/registry/store"
)

// TestPeel: a batch's namespaces and nodes beyond its last ViewSlice go
// first, ViewSlice a batch, as chunks without member rows, deletions or
// cursors; rows the batch deletes and a name's last record stay with it;
// a Replace sees the peeled rows in Present.
func TestPeel(t *testing.T) {
	t.Parallel()
	small := store.Batch{ClusterID: "c", Nodes: nodesNamed(ViewSlice)}
	if first, rest := peel(small); len(first) != 0 || len(rest.Nodes) != ViewSlice {
		t.Errorf("a batch of %d nodes: %d peeled, %d left; want it whole", ViewSlice, len(first), len(rest.Nodes))
	}

	nodes := nodesNamed(2*ViewSlice + 10)
	nodes = append(nodes, store.Node{Name: "n0000", UID: "last"}) // n0000 again: the last record wins
	b := store.Batch{ClusterID: "c", Epoch: 3, Failovers: 1, Nodes: nodes,
		Namespaces: []store.Namespace{{Name: "a"}, {Name: "gone"}},
		Pods:       []store.Pod{{Namespace: "a", Name: "p"}},
		Deleted:    store.Keys{store.ResourceNamespaces: {{Name: "gone"}}},
		Replace:    []store.Resource{store.ResourceNodes},
		Present:    []store.ObjectKey{{Name: "earlier"}},
		Cursors:    map[store.Resource]string{store.ResourceNodes: "9"},
	}
	first, rest := peel(b)
	var peeled []string
	for i, p := range first {
		if !p.Chunk || p.ClusterID != "c" || p.Epoch != 3 || p.Failovers != 1 || len(p.Pods)+len(p.Deleted)+len(p.Cursors)+len(p.Replace)+len(p.Present) != 0 {
			t.Errorf("peeled batch %d is not a fenced chunk of view rows only: %+v", i, p)
		}
		if n := len(p.Namespaces) + len(p.Nodes); n == 0 || n > ViewSlice {
			t.Errorf("peeled batch %d has %d view rows, want 1 to %d", i, n, ViewSlice)
		}
		for _, ns := range p.Namespaces {
			peeled = append(peeled, "ns/"+ns.Name)
		}
		for _, nd := range p.Nodes {
			peeled = append(peeled, nd.Name)
			if nd.Name == "n0000" && nd.UID != "last" {
				t.Errorf("n0000 peeled with its first record, want its last")
			}
		}
	}
	if slices.Contains(peeled, "ns/gone") {
		t.Errorf("the namespace the batch deletes was peeled; it must stay with the deletion")
	}
	if got := len(rest.Namespaces) + len(rest.Nodes); got > ViewSlice+1 {
		t.Errorf("%d view rows left, want the last %d and the one deleted", got, ViewSlice)
	}
	if len(peeled)+len(rest.Namespaces)+len(rest.Nodes) != 2*ViewSlice+12 {
		t.Errorf("%d peeled and %d left, want every one of the %d names once", len(peeled), len(rest.Namespaces)+len(rest.Nodes), 2*ViewSlice+12)
	}
	present := map[string]bool{}
	for _, k := range rest.Present {
		present[k.Name] = true
	}
	if !present["earlier"] {
		t.Errorf("the batch's own Present was dropped")
	}
	for _, name := range peeled {
		if len(name) > 3 && name[:3] == "ns/" {
			if present[name[3:]] {
				t.Errorf("namespace %s is in Present, but the batch replaces nodes only", name[3:])
			}
			continue
		}
		if !present[name] {
			t.Errorf("peeled node %s is not in Present: the relist would delete it", name)
		}
	}
	if len(rest.Pods) != 1 || rest.Cursors[store.ResourceNodes] != "9" || len(rest.Deleted) != 1 || rest.Chunk {
		t.Errorf("what is left lost the batch's member rows, cursors, deletions or kind: %+v", rest)
	}
	if len(b.Present) != 1 {
		t.Errorf("peel changed the caller's Present")
	}
}

func nodesNamed(n int) []store.Node {
	out := make([]store.Node, n)
	for i := range out {
		out[i] = store.Node{Name: fmt.Sprintf("n%04d", i)}
	}
	return out
}
