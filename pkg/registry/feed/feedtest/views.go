package feedtest

import "github.com/example/platform-apiserver/pkg/registry/store"

// PutNamespace adds or replaces a ClusterNamespace (ADDED or MODIFIED) and
// returns its new resourceVersion. Namespaces are kept for the feed only.
func (m *MemFeed) PutNamespace(ns store.ClusterNamespace) int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.rv++
	ns.ResourceVersion = m.rv
	k := key(ns.ClusterID, ns.Namespace.Name)
	c := store.Change{ResourceVersion: m.rv, Type: store.ChangeAdded, Kind: store.KindClusterNamespace, ClusterID: ns.ClusterID,
		Object: new(ns), Size: recordSize}
	if prev, ok := m.namespaces[k]; ok {
		c.Type, c.Prev, c.Size = store.ChangeModified, new(prev), 2*recordSize
	}
	m.namespaces[k] = ns
	m.commit(c)
	return m.rv
}

// DeleteNamespace removes a ClusterNamespace (DELETED at a new resourceVersion).
func (m *MemFeed) DeleteNamespace(cluster, name string) int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := key(cluster, name)
	prev, ok := m.namespaces[k]
	if !ok {
		return m.rv
	}
	m.rv++
	last := prev
	last.ResourceVersion = m.rv
	delete(m.namespaces, k)
	m.commit(store.Change{ResourceVersion: m.rv, Type: store.ChangeDeleted, Kind: store.KindClusterNamespace,
		ClusterID: cluster, Object: new(last), Prev: new(prev), Size: 2 * recordSize})
	return m.rv
}

// PutCapacity adds or replaces a ClusterCapacity (ADDED or MODIFIED) and
// returns its new resourceVersion. Capacities are kept for the feed only.
func (m *MemFeed) PutCapacity(cc store.ClusterCapacity) int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.rv++
	cc.ResourceVersion = m.rv
	c := store.Change{ResourceVersion: m.rv, Type: store.ChangeAdded, Kind: store.KindClusterCapacity, ClusterID: cc.ClusterID,
		Object: new(cc), Size: recordSize}
	if prev, ok := m.capacities[cc.ClusterID]; ok {
		c.Type, c.Prev, c.Size = store.ChangeModified, new(prev), 2*recordSize
	}
	m.capacities[cc.ClusterID] = cc
	m.commit(c)
	return m.rv
}
