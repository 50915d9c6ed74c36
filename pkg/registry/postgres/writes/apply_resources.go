package writes

import (
	"github.com/example/platform-apiserver/pkg/registry/store"
)

// memberTable is how Apply writes one member resource of a batch: which
// section its rows are written in, the rows a relist of it leaves absent,
// and its delete and upsert statements. A member resource is added here,
// with its slot in store.Batch and its statements.
type memberTable struct {
	resource store.Resource
	// view: its rows are view rows (namespaces, nodes), written under a
	// commit ticket; else member rows (pods, quotas), under the member's lock.
	view bool
	// keys returns the keys of the batch's records of the resource.
	keys func(b *store.Batch) []store.ObjectKey
	// absent lists the keys of the member's rows that are not in present.
	absent func(a *applier, present []store.ObjectKey) ([]store.ObjectKey, error)
	// delete removes the rows of b.Deleted[resource]; upsert writes the
	// batch's records.
	delete, upsert func(a *applier) error
}

// memberTables are the member resources Apply writes, in the order it
// writes them within a section: every delete, then every upsert.
var memberTables = append([]memberTable{
	{
		resource: store.ResourceNamespaces,
		view:     true,
		keys: func(b *store.Batch) []store.ObjectKey {
			return keysOf(b.Namespaces, func(n store.Namespace) store.ObjectKey { return store.ObjectKey{Name: n.Name} })
		},
		absent: func(a *applier, present []store.ObjectKey) ([]store.ObjectKey, error) {
			return a.absentNames("cluster_namespace", sqlAbsentNamespaces, present)
		},
		delete: (*applier).deleteNamespaces,
		upsert: (*applier).upsertNamespaces,
	},
	{
		resource: store.ResourceNodes,
		view:     true,
		keys: func(b *store.Batch) []store.ObjectKey {
			return keysOf(b.Nodes, func(n store.Node) store.ObjectKey { return store.ObjectKey{Name: n.Name} })
		},
		absent: func(a *applier, present []store.ObjectKey) ([]store.ObjectKey, error) {
			return a.absentNames("cluster_node", sqlAbsentNodes, present)
		},
		delete: (*applier).deleteNodes,
		upsert: (*applier).upsertNodes,
	},
	{
		resource: store.ResourcePods,
		keys: func(b *store.Batch) []store.ObjectKey {
			return keysOf(b.Pods, func(p store.Pod) store.ObjectKey { return store.ObjectKey{Namespace: p.Namespace, Name: p.Name} })
		},
		absent: func(a *applier, present []store.ObjectKey) ([]store.ObjectKey, error) {
			return a.absentKeys("cluster_pod", sqlAbsentPods, present)
		},
		delete: (*applier).deletePods,
		upsert: (*applier).upsertPods,
	},
	{
		resource: store.ResourceResourceQuotas,
		keys: func(b *store.Batch) []store.ObjectKey {
			return keysOf(b.Quotas, func(q store.Quota) store.ObjectKey { return store.ObjectKey{Namespace: q.Namespace, Name: q.Name} })
		},
		absent: func(a *applier, present []store.ObjectKey) ([]store.ObjectKey, error) {
			return a.absentKeys("cluster_resource_quota", sqlAbsentQuotas, present)
		},
		delete: (*applier).deleteQuotas,
		upsert: (*applier).upsertQuotas,
	},
}, deviceTables...)

// memberTableOf returns the table of a member resource.
func memberTableOf(r store.Resource) (memberTable, bool) {
	for _, t := range memberTables {
		if t.resource == r {
			return t, true
		}
	}
	return memberTable{}, false
}

// writes returns the statements writing the member resources of one section
// (view or member rows): their deletes, then their upserts.
func (a *applier) writes(view bool) []func() error {
	var deletes, upserts []func() error
	for _, t := range memberTables {
		if t.view == view {
			deletes = append(deletes, func() error { return t.delete(a) })
			upserts = append(upserts, func() error { return t.upsert(a) })
		}
	}
	return append(deletes, upserts...)
}

// keysOf returns the keys of records.
func keysOf[R any](records []R, key func(R) store.ObjectKey) []store.ObjectKey {
	out := make([]store.ObjectKey, len(records))
	for i, r := range records {
		out[i] = key(r)
	}
	return out
}

// keyNames returns the names of cluster-scoped keys.
func keyNames(keys []store.ObjectKey) []string {
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = k.Name
	}
	return out
}
