package feedtest_test

import (
	"testing"

	"github.com/example/platform-apiserver/pkg/registry/feed/feedtest"
	"github.com/example/platform-apiserver/pkg/registry/store"
	"github.com/example/platform-apiserver/pkg/registry/store/storetest"
)

func TestChangeFeedConformance(t *testing.T) {
	storetest.RunChangeFeedConformance(t, func(*testing.T) storetest.Harness { return harness{feedtest.New()} })
}

type harness struct{ m *feedtest.MemFeed }

func (h harness) Feed() store.ChangeFeed { return h.m }

func (h harness) Put(t *testing.T, kind store.Kind, cluster, name string) {
	switch kind {
	case store.KindNodeCapacity:
		h.m.Put(store.NodeCapacity{ClusterID: cluster, Node: store.Node{Name: name}})
	case store.KindClusterNamespace:
		h.m.PutNamespace(store.ClusterNamespace{ClusterID: cluster, Namespace: store.Namespace{Name: name}})
	case store.KindClusterCapacity:
		h.m.PutCapacity(store.ClusterCapacity{ClusterID: name})
	default:
		t.Fatalf("put of kind %s", kind)
	}
}

func (h harness) Delete(t *testing.T, kind store.Kind, cluster, name string) {
	switch kind {
	case store.KindNodeCapacity:
		h.m.Delete(cluster, name)
	case store.KindClusterNamespace:
		h.m.DeleteNamespace(cluster, name)
	default:
		t.Fatalf("delete of kind %s", kind)
	}
}
