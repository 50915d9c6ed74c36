package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/example/platform-apiserver/pkg/registry/store"
)

// Apply commits a batch in one transaction, fenced by the batch's epoch.
// Under the member's lock: the rows of a relist that are gone, pods and
// quotas (deletes, then upserts that skip unchanged rows) and the cursors.
// Under the writer lock: namespaces and nodes, then the aggregates of every
// node and namespace the batch touched. Each object should appear at most
// once in a batch; one listed both as present and as deleted ends up present.
func (s *Store) Apply(ctx context.Context, b store.Batch) error {
	if b.ClusterID == "" {
		return errors.New("apply: batch has no cluster id")
	}
	a := &applier{b: b, cluster: b.ClusterID, nodes: pairs{}, namespaces: pairs{}}
	return s.write(ctx, opApply, sections{
		member: func(w *writer) error {
			a.writer = w
			return a.run(
				func() error { return w.fence(store.Fence{ClusterID: b.ClusterID, Epoch: b.Epoch}) },
				a.replace,
				a.deletePods,
				a.deleteQuotas,
				a.upsertPods,
				a.upsertQuotas,
				a.saveCursors,
			)
		},
		views: func(w *writer) error {
			a.writer = w
			return a.run(
				a.deleteNamespaces,
				a.deleteNodes,
				a.upsertNamespaces,
				a.upsertNodes,
				func() error { return a.recomputeNodes(a.nodes) },
				func() error { return a.recomputeNamespaces(a.namespaces) },
			)
		},
	})
}

// applier carries one Apply and the nodes and namespaces it touched.
type applier struct {
	*writer
	b          store.Batch
	cluster    string
	nodes      pairs // aggregates to recompute
	namespaces pairs
}

// run runs steps in order until one fails.
func (a *applier) run(steps ...func() error) error {
	for _, step := range steps {
		if err := step(); err != nil {
			return err
		}
	}
	return nil
}

// replace turns a relist into deletions: rows of a replaced resource that the
// batch does not carry join the batch's deleted lists.
func (a *applier) replace() error {
	for _, r := range a.b.Replace {
		switch r {
		case store.ResourceNamespaces:
			names, err := a.absentNames("cluster_namespace", append(namespaceNames(a.b.Namespaces), presentNames(a.b.Present)...))
			if err != nil {
				return err
			}
			a.b.DeletedNamespaces = append(a.b.DeletedNamespaces, names...)
		case store.ResourceNodes:
			names, err := a.absentNames("cluster_node", append(nodeNames(a.b.Nodes), presentNames(a.b.Present)...))
			if err != nil {
				return err
			}
			a.b.DeletedNodes = append(a.b.DeletedNodes, names...)
		case store.ResourcePods:
			keys := make([]store.ObjectKey, len(a.b.Pods), len(a.b.Pods)+len(a.b.Present))
			for i, p := range a.b.Pods {
				keys[i] = store.ObjectKey{Namespace: p.Namespace, Name: p.Name}
			}
			keys = append(keys, a.b.Present...)
			absent, err := a.absentKeys("cluster_pod", keys)
			if err != nil {
				return err
			}
			a.b.DeletedPods = append(a.b.DeletedPods, absent...)
		case store.ResourceResourceQuotas:
			keys := make([]store.ObjectKey, len(a.b.Quotas), len(a.b.Quotas)+len(a.b.Present))
			for i, q := range a.b.Quotas {
				keys[i] = store.ObjectKey{Namespace: q.Namespace, Name: q.Name}
			}
			keys = append(keys, a.b.Present...)
			absent, err := a.absentKeys("cluster_resource_quota", keys)
			if err != nil {
				return err
			}
			a.b.DeletedQuotas = append(a.b.DeletedQuotas, absent...)
		default:
			return fmt.Errorf("apply: cannot replace unknown resource %q", r)
		}
	}
	return nil
}

// presentNames returns the names of cluster-scoped keys.
func presentNames(keys []store.ObjectKey) []string {
	names := make([]string, len(keys))
	for i, k := range keys {
		names[i] = k.Name
	}
	return names
}

// absentNames lists names of the cluster's rows in table (a fixed identifier) not in present.
func (a *applier) absentNames(table string, present []string) ([]string, error) {
	// An anti-join, not NOT (name = ANY(...)), which compares every row
	// with every name: quadratic in a relist of thousands.
	rows, err := a.tx.Query(a.ctx, `
		SELECT r.name FROM `+table+` r
		WHERE r.cluster_id = $1 AND NOT EXISTS (SELECT 1 FROM unnest($2::text[]) AS k(name) WHERE k.name = r.name)`, a.cluster, present)
	if err != nil {
		return nil, fmt.Errorf("replace %s: %w", table, err)
	}
	var out []string
	var name string
	for rows.Next() {
		if err := rows.Scan(&name); err != nil {
			return nil, err
		}
		out = append(out, name)
	}
	return out, rows.Err()
}

// absentKeys lists keys of the cluster's rows in table (a fixed identifier) not in present.
func (a *applier) absentKeys(table string, present []store.ObjectKey) ([]store.ObjectKey, error) {
	nss, names := splitKeys(present)
	rows, err := a.tx.Query(a.ctx, `
		SELECT r.namespace, r.name FROM `+table+` r
		WHERE r.cluster_id = $1 AND NOT EXISTS (
			SELECT 1 FROM unnest($2::text[], $3::text[]) AS k(namespace, name)
			WHERE k.namespace = r.namespace AND k.name = r.name)`, a.cluster, nss, names)
	if err != nil {
		return nil, fmt.Errorf("replace %s: %w", table, err)
	}
	var out []store.ObjectKey
	for rows.Next() {
		var k store.ObjectKey
		if err := rows.Scan(&k.Namespace, &k.Name); err != nil {
			return nil, err
		}
		out = append(out, k)
	}
	return out, rows.Err()
}

// deleteNamespaces removes namespace view rows (each deletion takes a
// resourceVersion, its tombstone's). Their pods and quotas are not deleted
// with them: Kubernetes removes a namespace only after its contents, whose own
// deletions discovery records, and a cascade here could remove the pods of a
// namespace recreated under the same name that the pod loop already wrote.
func (a *applier) deleteNamespaces() error {
	if len(a.b.DeletedNamespaces) == 0 {
		return nil
	}
	return a.deleteViewRows("delete namespaces",
		`DELETE FROM cluster_namespace WHERE cluster_id = $1 AND name = ANY($2::text[])`, a.cluster, a.b.DeletedNamespaces)
}

// deleteNodes removes node view rows and their metrics history; pods bound
// to them stay until discovery deletes them.
func (a *applier) deleteNodes() error {
	if len(a.b.DeletedNodes) == 0 {
		return nil
	}
	if _, err := a.tx.Exec(a.ctx, `DELETE FROM cluster_node_metrics WHERE cluster_id = $1 AND node = ANY($2::text[])`,
		a.cluster, a.b.DeletedNodes); err != nil {
		return fmt.Errorf("delete metrics of deleted nodes: %w", err)
	}
	return a.deleteViewRows("delete nodes",
		`DELETE FROM cluster_node WHERE cluster_id = $1 AND name = ANY($2::text[])`, a.cluster, a.b.DeletedNodes)
}

func (a *applier) deletePods() error {
	if len(a.b.DeletedPods) == 0 {
		return nil
	}
	nss, names := splitKeys(a.b.DeletedPods)
	rows, err := a.tx.Query(a.ctx, `
		DELETE FROM cluster_pod p USING unnest($2::text[], $3::text[]) AS k(namespace, name)
		WHERE p.cluster_id = $1 AND p.namespace = k.namespace AND p.name = k.name
		RETURNING p.namespace, coalesce(p.node_name, '')`, a.cluster, nss, names)
	if err != nil {
		return fmt.Errorf("delete pods: %w", err)
	}
	return a.collectNamespacesAndNodes(rows)
}

func (a *applier) deleteQuotas() error {
	if len(a.b.DeletedQuotas) == 0 {
		return nil
	}
	nss, names := splitKeys(a.b.DeletedQuotas)
	rows, err := a.tx.Query(a.ctx, `
		DELETE FROM cluster_resource_quota q USING unnest($2::text[], $3::text[]) AS k(namespace, name)
		WHERE q.cluster_id = $1 AND q.namespace = k.namespace AND q.name = k.name
		RETURNING q.namespace`, a.cluster, nss, names)
	if err != nil {
		return fmt.Errorf("delete quotas: %w", err)
	}
	return a.collectNamespaces(rows)
}

func (a *applier) upsertNamespaces() error {
	nss := lastByKey(a.b.Namespaces, func(n store.Namespace) string { return n.Name })
	if len(nss) == 0 {
		return nil
	}
	var (
		names, uids, labels, phases = make([]string, len(nss)), make([]string, len(nss)), make([]string, len(nss)), make([]string, len(nss))
		created                     = make([]*time.Time, len(nss))
	)
	for i, n := range nss {
		names[i], uids[i], phases[i], created[i] = n.Name, n.UID, n.Phase, timeOrNil(n.CreatedAt)
		labels[i] = mustJSON(n.Labels, "{}")
		a.namespaces.add(a.cluster, n.Name)
	}
	return a.stamp("upsert namespaces", `
		WITH i AS (
			SELECT * FROM unnest($2::text[], $3::text[], $4::text[], $5::text[], $6::timestamptz[])
				AS i(name, uid, labels, phase, created_at)
		), changed AS (
			INSERT INTO cluster_namespace AS c (cluster_id, name, uid, labels, phase, created_at, resource_version)
			SELECT $1::text, i.name, i.uid, i.labels::jsonb, i.phase, i.created_at, nextval('registry_resource_version')
			FROM i LEFT JOIN cluster_namespace cur ON cur.cluster_id = $1::text AND cur.name = i.name
			WHERE cur.name IS NULL
				OR (cur.uid, cur.labels, cur.phase, cur.created_at) IS DISTINCT FROM (i.uid, i.labels::jsonb, i.phase, i.created_at)
			ON CONFLICT (cluster_id, name) DO UPDATE SET
				uid = EXCLUDED.uid, labels = EXCLUDED.labels, phase = EXCLUDED.phase,
				created_at = EXCLUDED.created_at, resource_version = EXCLUDED.resource_version
			WHERE (c.uid, c.labels, c.phase, c.created_at)
				IS DISTINCT FROM (EXCLUDED.uid, EXCLUDED.labels, EXCLUDED.phase, EXCLUDED.created_at)
			RETURNING c.resource_version)
		SELECT coalesce(max(resource_version), 0) FROM changed`,
		a.cluster, names, uids, labels, phases, created)
}

func (a *applier) upsertNodes() error {
	nodes := lastByKey(a.b.Nodes, func(n store.Node) string { return n.Name })
	if len(nodes) == 0 {
		return nil
	}
	n := len(nodes)
	var (
		names, uids, labels, conditions, taints = make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		created                                 = make([]*time.Time, n)
		capCPU, capMem, capPods                 = make([]int64, n), make([]int64, n), make([]int64, n)
		allocCPU, allocMem, allocPods           = make([]int64, n), make([]int64, n), make([]int64, n)
		unschedulable, ready                    = make([]bool, n), make([]bool, n)
	)
	for i, nd := range nodes {
		names[i], uids[i], created[i] = nd.Name, nd.UID, timeOrNil(nd.CreatedAt)
		labels[i] = mustJSON(nd.Labels, "{}")
		conditions[i] = mustJSON(nd.Conditions, "[]")
		taints[i] = mustJSON(nd.Taints, "[]")
		capCPU[i], capMem[i], capPods[i] = nd.Capacity.CPUMillis, nd.Capacity.MemoryBytes, nd.Capacity.Pods
		allocCPU[i], allocMem[i], allocPods[i] = nd.Allocatable.CPUMillis, nd.Allocatable.MemoryBytes, nd.Allocatable.Pods
		unschedulable[i], ready[i] = nd.Unschedulable, nd.Ready
		a.nodes.add(a.cluster, nd.Name)
	}
	const cols = `uid, labels, created_at, capacity_cpu_millis, capacity_memory_bytes, capacity_pods,
		allocatable_cpu_millis, allocatable_memory_bytes, allocatable_pods, unschedulable, ready, conditions, taints`
	return a.stamp("upsert nodes", `
		WITH i AS (
			SELECT name, uid, labels::jsonb AS labels, created_at, capacity_cpu_millis, capacity_memory_bytes, capacity_pods,
				allocatable_cpu_millis, allocatable_memory_bytes, allocatable_pods, unschedulable, ready,
				conditions::jsonb AS conditions, taints::jsonb AS taints
			FROM unnest($2::text[], $3::text[], $4::text[], $5::timestamptz[], $6::int8[], $7::int8[], $8::int8[],
				$9::int8[], $10::int8[], $11::int8[], $12::bool[], $13::bool[], $14::text[], $15::text[])
				AS i(name, `+cols+`)
		), changed AS (
			INSERT INTO cluster_node AS c (cluster_id, name, `+cols+`, resource_version)
			SELECT $1::text, i.name, i.uid, i.labels, i.created_at, i.capacity_cpu_millis, i.capacity_memory_bytes, i.capacity_pods,
				i.allocatable_cpu_millis, i.allocatable_memory_bytes, i.allocatable_pods, i.unschedulable, i.ready,
				i.conditions, i.taints, nextval('registry_resource_version')
			FROM i LEFT JOIN cluster_node cur ON cur.cluster_id = $1::text AND cur.name = i.name
			WHERE cur.name IS NULL OR (`+prefixed("cur", cols)+`) IS DISTINCT FROM (`+prefixed("i", cols)+`)
			ON CONFLICT (cluster_id, name) DO UPDATE SET `+assignExcluded(cols)+`, resource_version = EXCLUDED.resource_version
			WHERE (`+prefixed("c", cols)+`) IS DISTINCT FROM (`+prefixed("EXCLUDED", cols)+`)
			RETURNING c.resource_version)
		SELECT coalesce(max(resource_version), 0) FROM changed`,
		a.cluster, names, uids, labels, created, capCPU, capMem, capPods,
		allocCPU, allocMem, allocPods, unschedulable, ready, conditions, taints)
}

// upsertPods writes pods and collects, for every pod that changed, the
// namespace and both its old and new node.
func (a *applier) upsertPods() error {
	pods := lastByKey(a.b.Pods, func(p store.Pod) string { return p.Namespace + "/" + p.Name })
	if len(pods) == 0 {
		return nil
	}
	n := len(pods)
	nss, names, uids, nodes, phases := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	cpu, mem := make([]int64, n), make([]int64, n)
	for i, p := range pods {
		nss[i], names[i], uids[i], nodes[i], phases[i] = p.Namespace, p.Name, p.UID, p.NodeName, p.Phase
		cpu[i], mem[i] = p.CPURequestMillis, p.MemoryRequestBytes
	}
	const cols = `uid, node_name, phase, cpu_request_millis, memory_request_bytes`
	rows, err := a.tx.Query(a.ctx, `
		WITH i AS (
			SELECT namespace, name, uid, nullif(node_name, '') AS node_name, phase, cpu_request_millis, memory_request_bytes
			FROM unnest($2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::int8[], $8::int8[])
				AS i(namespace, name, `+cols+`)
		), old AS (
			SELECT cur.namespace, cur.node_name
			FROM i JOIN cluster_pod cur ON cur.cluster_id = $1::text AND cur.namespace = i.namespace AND cur.name = i.name
			WHERE (`+prefixed("cur", cols)+`) IS DISTINCT FROM (`+prefixed("i", cols)+`)
		), changed AS (
			INSERT INTO cluster_pod AS c (cluster_id, namespace, name, `+cols+`)
			SELECT $1::text, i.namespace, i.name, `+prefixed("i", cols)+` FROM i
			ON CONFLICT (cluster_id, namespace, name) DO UPDATE SET `+assignExcluded(cols)+`
			WHERE (`+prefixed("c", cols)+`) IS DISTINCT FROM (`+prefixed("EXCLUDED", cols)+`)
			RETURNING c.namespace, c.node_name)
		SELECT namespace, coalesce(node_name, '') FROM old
		UNION SELECT namespace, coalesce(node_name, '') FROM changed`,
		a.cluster, nss, names, uids, nodes, phases, cpu, mem)
	if err != nil {
		return fmt.Errorf("upsert pods: %w", err)
	}
	return a.collectNamespacesAndNodes(rows)
}

func (a *applier) upsertQuotas() error {
	quotas := lastByKey(a.b.Quotas, func(q store.Quota) string { return q.Namespace + "/" + q.Name })
	if len(quotas) == 0 {
		return nil
	}
	n := len(quotas)
	nss, names, hard, used := make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	for i, q := range quotas {
		nss[i], names[i] = q.Namespace, q.Name
		hard[i], used[i] = mustJSON(q.Hard, "{}"), mustJSON(q.Used, "{}")
	}
	rows, err := a.tx.Query(a.ctx, `
		WITH i AS (
			SELECT namespace, name, hard::jsonb AS hard, used::jsonb AS used
			FROM unnest($2::text[], $3::text[], $4::text[], $5::text[]) AS i(namespace, name, hard, used)
		), changed AS (
			INSERT INTO cluster_resource_quota AS c (cluster_id, namespace, name, hard, used)
			SELECT $1::text, i.namespace, i.name, i.hard, i.used FROM i
			ON CONFLICT (cluster_id, namespace, name) DO UPDATE SET hard = EXCLUDED.hard, used = EXCLUDED.used
			WHERE (c.hard, c.used) IS DISTINCT FROM (EXCLUDED.hard, EXCLUDED.used)
			RETURNING c.namespace)
		SELECT DISTINCT namespace FROM changed`,
		a.cluster, nss, names, hard, used)
	if err != nil {
		return fmt.Errorf("upsert quotas: %w", err)
	}
	return a.collectNamespaces(rows)
}

func (a *applier) saveCursors() error {
	if len(a.b.Cursors) == 0 {
		return nil
	}
	var resources, versions []string
	for r, v := range a.b.Cursors {
		resources = append(resources, string(r))
		versions = append(versions, v)
	}
	_, err := a.tx.Exec(a.ctx, `
		INSERT INTO discovery_cursor (cluster_id, resource, resource_version, updated_at)
		SELECT $1::text, r, v, now() FROM unnest($2::text[], $3::text[]) AS t(r, v)
		ON CONFLICT (cluster_id, resource) DO UPDATE
		SET resource_version = EXCLUDED.resource_version, updated_at = EXCLUDED.updated_at`,
		a.cluster, resources, versions)
	if err != nil {
		return fmt.Errorf("save cursors: %w", err)
	}
	return nil
}
