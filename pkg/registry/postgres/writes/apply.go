package writes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/example/platform-apiserver/pkg/registry/postgres/views"
	"github.com/example/platform-apiserver/pkg/registry/store"
)

// Apply commits a batch in one transaction, fenced by the batch's epoch
// (a large one in parts, apply_parts.go; a relist's last batch of member
// rows in steps, apply_relist.go).
// Under the member's lock: the rows of a relist that are gone, which of the
// batch's namespaces and nodes change (dropUnchanged), the member rows (pods
// and quotas: deletes, then upserts that skip unchanged rows), the
// aggregates that change (computeAggregates) and the cursors. Under a
// commit ticket, only if any view row changes: the view rows (namespaces and
// nodes), then the aggregates computed before (see memberTables). Each
// object should appear at most once in a batch; one listed both as present
// and as deleted ends up present. Concurrent calls are committed together
// (group commit, apply_group.go).
func (e *Engine) Apply(ctx context.Context, b store.Batch) error {
	if b.ClusterID == "" {
		return errors.New("apply: batch has no cluster id")
	}
	return e.apply(ctx, b) // apply_group.go
}

// newApplier prepares one batch's Apply.
func newApplier(b store.Batch) *applier {
	b.Deleted = maps.Clone(b.Deleted) // replace adds to it, not to the caller's
	return &applier{b: b, cluster: b.ClusterID, nodes: pairs{}, namespaces: pairs{}}
}

// sections are the batch's sections of a write transaction.
func (a *applier) sections() Sections {
	b := &a.b
	return Sections{
		Member: func(w *Writer) error {
			a.Writer = w
			statements := []func() error{
				func() error {
					return w.Fence(store.Fence{ClusterID: b.ClusterID, Epoch: b.Epoch, Failovers: b.Failovers})
				},
				a.replace,
				a.dropUnchanged,
			}
			statements = append(statements, a.writes(false)...)
			return a.run(append(statements, a.computeAggregates, a.saveCursors)...)
		},
		SkipViews: a.noViewChanges,
		Views: func(w *Writer) error {
			a.Writer = w
			return a.run(append(a.writes(true),
				func() error { return w.stampAggregates(a.nodeAggregates) },
				func() error { return w.stampAggregates(a.namespaceAggregates) },
				a.recomputeMemberDevices,
			)...)
		},
	}
}

// applier carries one Apply and the nodes and namespaces it touched.
type applier struct {
	*Writer
	b          store.Batch
	cluster    string
	nodes      pairs // aggregates to recompute
	namespaces pairs
	// namespaceRows and nodeRows are the batch's namespaces and nodes the
	// views section writes (dropUnchanged).
	namespaceRows []store.ClusterNamespace
	nodeRows      []store.NodeCapacity
	// nodeAggregates and namespaceAggregates are the aggregates the views
	// section writes (computeAggregates).
	nodeAggregates, namespaceAggregates aggregates
}

// run runs a section's statements in order until one fails.
func (a *applier) run(statements ...func() error) error {
	for _, statement := range statements {
		if err := statement(); err != nil {
			return err
		}
	}
	return nil
}

// replace turns a relist into deletions: rows of a replaced resource that the
// batch does not carry join the batch's deleted keys, and so do all rows of
// a resource the member does not serve (Unserved).
func (a *applier) replace() error {
	for _, r := range slices.Concat(a.b.Replace, slices.Sorted(maps.Keys(a.b.Unserved))) {
		t, ok := memberTableOf(r)
		if !ok {
			return fmt.Errorf("apply: cannot replace unknown resource %q", r)
		}
		absent, err := t.absent(a, append(t.keys(&a.b), a.b.Present...))
		if err != nil {
			return err
		}
		if a.b.Deleted == nil {
			a.b.Deleted = store.Keys{}
		}
		a.b.Deleted[r] = append(a.b.Deleted[r], absent...)
	}
	return nil
}

var (
	sqlAbsentNamespaces  = statement("apply_absent_namespaces")
	sqlAbsentNodes       = statement("apply_absent_nodes")
	sqlAbsentPods        = statement("apply_absent_pods")
	sqlAbsentQuotas      = statement("apply_absent_quotas")
	sqlDeleteNamespaces  = statement("apply_delete_namespaces")
	sqlDeleteNodeMetrics = statement("apply_delete_node_metrics")
	sqlDeleteNodes       = statement("apply_delete_nodes")
	sqlDeletePods        = statement("apply_delete_pods")
	sqlDeleteQuotas      = statement("apply_delete_quotas")
	sqlUpsertPods        = statement("apply_upsert_pods")
	sqlUpsertQuotas      = statement("apply_upsert_quotas")
	sqlSaveCursors       = statement("apply_save_cursors")
)

// absentNames lists the keys of the cluster's cluster-scoped rows (sql:
// apply_absent_namespaces or apply_absent_nodes) whose names are not in present.
func (a *applier) absentNames(what, sql string, present []store.ObjectKey) ([]store.ObjectKey, error) {
	names := keyNames(present)
	if err := CheckText("name", names...); err != nil {
		return nil, fmt.Errorf("replace %s: %w", what, err)
	}
	rows, err := a.tx.Query(a.ctx, sql, a.cluster, names)
	if err != nil {
		return nil, fmt.Errorf("replace %s: %w", what, err)
	}
	var out []store.ObjectKey
	var name string
	for rows.Next() {
		if err := rows.Scan(&name); err != nil {
			return nil, err
		}
		out = append(out, store.ObjectKey{Name: name})
	}
	return out, rows.Err()
}

// absentKeys lists keys of the cluster's rows (sql: apply_absent_pods or
// apply_absent_quotas) not in present.
func (a *applier) absentKeys(what, sql string, present []store.ObjectKey) ([]store.ObjectKey, error) {
	keys, err := keyRows(present)
	if err != nil {
		return nil, fmt.Errorf("replace %s: %w", what, err)
	}
	param, err := JSONRows(keys)
	if err != nil {
		return nil, fmt.Errorf("replace %s: %w", what, err)
	}
	rows, err := a.tx.Query(a.ctx, sql, a.cluster, param)
	if err != nil {
		return nil, fmt.Errorf("replace %s: %w", what, err)
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
	deleted := keyNames(a.b.Deleted[store.ResourceNamespaces])
	if len(deleted) == 0 {
		return nil
	}
	if err := CheckText("namespace", deleted...); err != nil {
		return fmt.Errorf("delete namespaces: %w", err)
	}
	return a.deleteViewRows("delete namespaces", sqlDeleteNamespaces, a.cluster, deleted)
}

// deleteNodes removes node view rows and their metrics history; pods bound
// to them stay until discovery deletes them.
func (a *applier) deleteNodes() error {
	deleted := keyNames(a.b.Deleted[store.ResourceNodes])
	if len(deleted) == 0 {
		return nil
	}
	if err := CheckText("node", deleted...); err != nil {
		return fmt.Errorf("delete nodes: %w", err)
	}
	if _, err := a.tx.Exec(a.ctx, sqlDeleteNodeMetrics, a.cluster, deleted); err != nil {
		return fmt.Errorf("delete metrics of deleted nodes: %w", err)
	}
	return a.deleteViewRows("delete nodes", sqlDeleteNodes, a.cluster, deleted)
}

func (a *applier) deletePods() error {
	deleted := a.b.Deleted[store.ResourcePods]
	if len(deleted) == 0 {
		return nil
	}
	rows, err := a.queryKeys(sqlDeletePods, deleted)
	if err != nil {
		return fmt.Errorf("delete pods: %w", err)
	}
	return a.collectNamespacesAndNodes(rows)
}

func (a *applier) deleteQuotas() error {
	deleted := a.b.Deleted[store.ResourceResourceQuotas]
	if len(deleted) == 0 {
		return nil
	}
	rows, err := a.queryKeys(sqlDeleteQuotas, deleted)
	if err != nil {
		return fmt.Errorf("delete quotas: %w", err)
	}
	return a.collectNames(rows, a.namespaces)
}

// queryKeys runs sql with the member ($1) and keys ($2, a jsonb array of keyRow).
func (a *applier) queryKeys(sql string, keys []store.ObjectKey) (pgx.Rows, error) {
	rows, err := keyRows(keys)
	if err != nil {
		return nil, err
	}
	param, err := JSONRows(rows)
	if err != nil {
		return nil, err
	}
	return a.tx.Query(a.ctx, sql, a.cluster, param)
}

// namespaceRecords and nodeRecords are the batch's namespaces and nodes
// (the last of each name) as view records, checked for text PostgreSQL
// cannot store.
func namespaceRecords(b *store.Batch) ([]store.ClusterNamespace, error) {
	nss := lastByKey(b.Namespaces, func(n store.Namespace) string { return n.Name })
	rows := make([]store.ClusterNamespace, len(nss))
	for i, n := range nss {
		if err := CheckText("namespace", n.Name, n.UID, n.Phase); err != nil {
			return nil, fmt.Errorf("upsert namespaces: %w", err)
		}
		rows[i] = store.ClusterNamespace{Namespace: n}
	}
	return rows, nil
}

func nodeRecords(b *store.Batch) ([]store.NodeCapacity, error) {
	nodes := lastByKey(b.Nodes, func(n store.Node) string { return n.Name })
	rows := make([]store.NodeCapacity, len(nodes))
	for i, nd := range nodes {
		if err := CheckText("node", nd.Name, nd.UID); err != nil {
			return nil, fmt.Errorf("upsert nodes: %w", err)
		}
		rows[i] = store.NodeCapacity{Node: nd}
	}
	return rows, nil
}

// dropUnchanged keeps of the batch's namespaces and nodes those the views
// section writes: new ones, changed ones and those the batch also deletes.
// It compares them with the member's rows under the member's lock, so a
// commit ticket is held only for what changes, and not at all for a batch
// (a relist after a restart, say) that changes no view row.
func (a *applier) dropUnchanged() error {
	nss, err := namespaceRecords(&a.b)
	if err != nil {
		return err
	}
	if a.namespaceRows, err = changedOnly(a, views.ClusterNamespace, nss, store.ResourceNamespaces, func(n *store.ClusterNamespace) string { return n.Namespace.Name }); err != nil {
		return err
	}
	nodes, err := nodeRecords(&a.b)
	if err != nil {
		return err
	}
	a.nodeRows, err = changedOnly(a, views.NodeCapacity, nodes, store.ResourceNodes, func(n *store.NodeCapacity) string { return n.Node.Name })
	return err
}

// changedOnly returns the records the view's upsert would write for the
// member, and those the batch also deletes (deleted, then written again).
func changedOnly[R any](a *applier, v *views.View[R], records []R, r store.Resource, name func(*R) string) ([]R, error) {
	if len(records) == 0 {
		return nil, nil
	}
	param, err := v.BatchRows(records)
	if err != nil {
		return nil, fmt.Errorf("compare %s: %w", r, err)
	}
	rows, err := a.tx.Query(a.ctx, v.ChangedSQL(), a.cluster, param)
	if err != nil {
		return nil, fmt.Errorf("compare %s: %w", r, err)
	}
	changed, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("compare %s: %w", r, err)
	}
	keep := make(map[string]bool, len(changed))
	for _, n := range changed {
		keep[n] = true
	}
	for _, k := range a.b.Deleted[r] {
		keep[k.Name] = true
	}
	return slices.DeleteFunc(records, func(rec R) bool { return !keep[name(&rec)] }), nil
}

// computeAggregates computes, after the member rows are written, the
// aggregates of the nodes and namespaces the batch changed or writes, and
// keeps those that change. A relist's chunk (Batch.Chunk) leaves those its
// member rows change to the relist's last batch, which computes them for
// every node and namespace of the member after its rows commit
// (apply_relist.go): a relist of 20,000 pods in 20 chunks then stamps each
// node once, not once per chunk that moved it.
func (a *applier) computeAggregates() error {
	nodes, namespaces := a.nodes, a.namespaces
	if a.b.Chunk {
		nodes, namespaces = pairs{}, pairs{}
	}
	nodeNames := make([]string, len(a.nodeRows))
	for i, n := range a.nodeRows {
		nodeNames[i] = n.Node.Name
		nodes.add(a.cluster, n.Node.Name)
	}
	namespaceNames := make([]string, len(a.namespaceRows))
	for i, n := range a.namespaceRows {
		namespaceNames[i] = n.Namespace.Name
		namespaces.add(a.cluster, n.Namespace.Name)
	}
	var err error
	if a.nodeAggregates, err = a.aggregate("node aggregates", sqlAggregateNodes, views.NodeCapacity.StampSQL(), nodes, nodeNames); err != nil {
		return err
	}
	a.namespaceAggregates, err = a.aggregate("namespace aggregates", sqlAggregateNamespaces, views.ClusterNamespace.StampSQL(), namespaces, namespaceNames)
	return err
}

// isMemberRows reports whether r's rows are member rows (pods, quotas,
// DRA), whose changes stamp the aggregates of view rows.
func isMemberRows(r store.Resource) bool {
	t, ok := memberTableOf(r)
	return ok && !t.view
}

// noViewChanges reports, after the member section, that the views section
// has nothing to write: no namespace or node to delete or write, no
// aggregate that changes and no device count.
func (a *applier) noViewChanges() bool {
	return len(a.namespaceRows)+len(a.nodeRows)+len(a.b.Deleted[store.ResourceNamespaces])+len(a.b.Deleted[store.ResourceNodes]) == 0 &&
		a.nodeAggregates.n+a.namespaceAggregates.n == 0 && !touchesDevices(&a.b)
}

func (a *applier) upsertNamespaces() error {
	rows := a.namespaceRows
	if len(rows) == 0 {
		return nil
	}
	param, err := views.ClusterNamespace.BatchRows(rows)
	if err != nil {
		return fmt.Errorf("upsert namespaces: %w", err)
	}
	return a.Stamp("upsert namespaces", views.ClusterNamespace.UpsertSQL(), a.cluster, param, a.namespaceAggregates.written)
}

func (a *applier) upsertNodes() error {
	rows := a.nodeRows
	if len(rows) == 0 {
		return nil
	}
	param, err := views.NodeCapacity.BatchRows(rows)
	if err != nil {
		return fmt.Errorf("upsert nodes: %w", err)
	}
	return a.Stamp("upsert nodes", views.NodeCapacity.UpsertSQL(), a.cluster, param, a.nodeAggregates.written)
}

// podRow is one row of apply_upsert_pods' jsonb parameter.
type podRow struct {
	Namespace          string `json:"namespace"`
	Name               string `json:"name"`
	UID                string `json:"uid"`
	NodeName           string `json:"node_name"`
	Phase              string `json:"phase"`
	CPURequestMillis   int64  `json:"cpu_request_millis"`
	MemoryRequestBytes int64  `json:"memory_request_bytes"`
	// RequestsOther is omitted when empty; the statement reads it as '{}'.
	RequestsOther map[string]int64 `json:"requests_other,omitempty"`
}

// upsertPods writes pods and collects, for every pod that changed, the
// namespace and both its old and new node.
func (a *applier) upsertPods() error {
	pods := lastByKey(a.b.Pods, func(p store.Pod) string { return p.Namespace + "/" + p.Name })
	if len(pods) == 0 {
		return nil
	}
	rows := make([]podRow, len(pods))
	for i, p := range pods {
		if err := CheckText("pod", p.Namespace, p.Name, p.UID, p.NodeName, p.Phase); err != nil {
			return fmt.Errorf("upsert pods: %w", err)
		}
		rows[i] = podRow{Namespace: p.Namespace, Name: p.Name, UID: p.UID, NodeName: p.NodeName, Phase: p.Phase,
			CPURequestMillis: p.CPURequestMillis, MemoryRequestBytes: p.MemoryRequestBytes, RequestsOther: p.OtherRequests}
	}
	param, err := JSONRows(rows)
	if err != nil {
		return fmt.Errorf("upsert pods: %w", err)
	}
	result, err := a.tx.Query(a.ctx, sqlUpsertPods, a.cluster, param)
	if err != nil {
		return fmt.Errorf("upsert pods: %w", err)
	}
	return a.collectNamespacesAndNodes(result)
}

// quotaRow is one row of apply_upsert_quotas' jsonb parameter.
type quotaRow struct {
	Namespace string          `json:"namespace"`
	Name      string          `json:"name"`
	Hard      json.RawMessage `json:"hard"`
	Used      json.RawMessage `json:"used"`
	// Scopes is never null: a NULL row was written by a release before
	// migration 030, which did not know them (cluster_claim_quota_scopes.sql).
	Scopes json.RawMessage `json:"scopes"`
}

func (a *applier) upsertQuotas() error {
	quotas := lastByKey(a.b.Quotas, func(q store.Quota) string { return q.Namespace + "/" + q.Name })
	if len(quotas) == 0 {
		return nil
	}
	rows := make([]quotaRow, len(quotas))
	for i, q := range quotas {
		if err := CheckText("resource quota", q.Namespace, q.Name); err != nil {
			return fmt.Errorf("upsert quotas: %w", err)
		}
		rows[i] = quotaRow{Namespace: q.Namespace, Name: q.Name, Hard: views.RawJSON(q.Hard, "{}"), Used: views.RawJSON(q.Used, "{}"),
			Scopes: views.RawJSON(q.Scopes, "[]")}
	}
	param, err := JSONRows(rows)
	if err != nil {
		return fmt.Errorf("upsert quotas: %w", err)
	}
	result, err := a.tx.Query(a.ctx, sqlUpsertQuotas, a.cluster, param)
	if err != nil {
		return fmt.Errorf("upsert quotas: %w", err)
	}
	return a.collectNames(result, a.namespaces)
}

// cursorRow is one row of apply_save_cursors' jsonb parameter.
type cursorRow struct {
	Resource        string `json:"resource"`
	ResourceVersion string `json:"resource_version"`
}

func (a *applier) saveCursors() error {
	if len(a.b.Cursors) == 0 {
		return nil
	}
	rows := make([]cursorRow, 0, len(a.b.Cursors))
	for r, v := range a.b.Cursors {
		if err := CheckText("cursor", string(r), v); err != nil {
			return fmt.Errorf("save cursors: %w", err)
		}
		rows = append(rows, cursorRow{Resource: string(r), ResourceVersion: v})
	}
	param, err := JSONRows(rows)
	if err != nil {
		return fmt.Errorf("save cursors: %w", err)
	}
	if _, err := a.tx.Exec(a.ctx, sqlSaveCursors, a.cluster, param); err != nil {
		return fmt.Errorf("save cursors: %w", err)
	}
	return nil
}
