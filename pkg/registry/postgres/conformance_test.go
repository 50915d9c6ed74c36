package postgres_test

import (
	"fmt"
	"testing"

	"github.com/example/platform-apiserver/pkg/registry/postgres"
	"github.com/example/platform-apiserver/pkg/registry/store"
	"github.com/example/platform-apiserver/pkg/registry/store/storetest"
)

func TestChangeFeedConformance(t *testing.T) {
	t.Parallel()
	storetest.RunChangeFeedConformance(t, func(t *testing.T) storetest.Harness {
		s, _ := setup(t, postgres.Options{})
		return &harness{s: s, synced: map[string]bool{}}
	})
}

// harness writes through the store's discovery writes: Apply for nodes and
// namespaces (a new label each time, so a put modifies), the member state
// for a ClusterCapacity.
type harness struct {
	s      *postgres.Store
	gen    int
	synced map[string]bool // each member's last reported state
}

func (h *harness) Feed() store.ChangeFeed { return h.s }

func (h *harness) Put(t *testing.T, kind store.Kind, cluster, name string) {
	t.Helper()
	h.gen++
	gen := fmt.Sprint(h.gen)
	switch kind {
	case store.KindNodeCapacity:
		mustApply(t, h.s, t.Context(), store.Batch{ClusterID: cluster, Nodes: []store.Node{withLabel(node(name, 1000, 1<<30), "gen", gen)}})
	case store.KindClusterNamespace:
		ns := namespace(name)
		ns.Labels["gen"] = gen
		mustApply(t, h.s, t.Context(), store.Batch{ClusterID: cluster, Namespaces: []store.Namespace{ns}})
	case store.KindClusterCapacity:
		h.synced[cluster] = !h.synced[cluster]
		state := store.MemberSyncing
		if h.synced[cluster] {
			state = store.MemberSynced
		}
		if err := h.s.RecordMemberState(t.Context(), store.Fence{ClusterID: cluster}, store.MemberStatus{State: state}); err != nil {
			t.Fatalf("RecordMemberState: %v", err)
		}
	default:
		t.Fatalf("put of kind %s", kind)
	}
}

func (h *harness) Delete(t *testing.T, kind store.Kind, cluster, name string) {
	t.Helper()
	switch kind {
	case store.KindNodeCapacity:
		mustApply(t, h.s, t.Context(), store.Batch{ClusterID: cluster, Deleted: store.Keys{store.ResourceNodes: {{Name: name}}}})
	case store.KindClusterNamespace:
		mustApply(t, h.s, t.Context(), store.Batch{ClusterID: cluster, Deleted: store.Keys{store.ResourceNamespaces: {{Name: name}}}})
	default:
		t.Fatalf("delete of kind %s", kind)
	}
}
