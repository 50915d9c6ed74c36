package feedtest

import "github.com/example/platform-apiserver/pkg/registry/store"

// PutNamespace adds or replaces a ClusterNamespace (ADDED or MODIFIED) and
// returns its new resourceVersion. Namespaces are kept for the feed only.
func (m *MemFeed) PutNamespace(ns store.ClusterNamespace) int64 {
	return put(m, m.namespaces, store.KindClusterNamespace, ns.ClusterID, key(ns.ClusterID, ns.Namespace.Name), ns, setNamespaceRV)
}

// DeleteNamespace removes a ClusterNamespace (DELETED at a new resourceVersion).
func (m *MemFeed) DeleteNamespace(cluster, name string) int64 {
	return remove(m, m.namespaces, store.KindClusterNamespace, cluster, key(cluster, name), setNamespaceRV)
}

// PutCapacity adds or replaces a ClusterCapacity (ADDED or MODIFIED) and
// returns its new resourceVersion. Capacities are kept for the feed only.
func (m *MemFeed) PutCapacity(cc store.ClusterCapacity) int64 {
	return put(m, m.capacities, store.KindClusterCapacity, cc.ClusterID, cc.ClusterID, cc, setCapacityRV)
}

func setNamespaceRV(n *store.ClusterNamespace, rv int64) { n.ResourceVersion = rv }
func setCapacityRV(c *store.ClusterCapacity, rv int64)   { c.ResourceVersion = rv }
