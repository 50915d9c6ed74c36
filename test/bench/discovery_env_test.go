package bench

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/example/platform-apiserver/pkg/registry/store"
)

const (
	// discoveryClusterID is the member the discovery environment's server
	// mirrors: its own kube-apiserver, as the integration test does.
	discoveryClusterID = "local"
	// syncNamespaces and syncPods are created in kube-apiserver next to
	// nodeCount Nodes before discovery syncs them.
	syncNamespaces = 10000
	syncPods       = 50000
)

// podsPerSyncNode and podsPerSyncNamespace follow from the counts: pod j
// is bound to node j%nodeCount and lives in namespace j/podsPerSyncNamespace.
const (
	podsPerSyncNode      = syncPods / nodeCount
	podsPerSyncNamespace = syncPods / syncNamespaces
)

// discoveryArgs make the platform-apiserver mirror the framework's own
// kube-apiserver as member "local" (the framework runs it in its work
// directory, where the admin kubeconfig is). Everything else is the default
// a deployment gets: batches of up to 1,000 events or 100ms, leader election
// on with a 15s lease (released on a graceful stop), metrics every 30s (no
// metrics.k8s.io here, so the scraper only logs that it is absent).
var discoveryArgs = []string{
	"--cluster-id=" + discoveryClusterID,
	"--kubeconfig=kubeconfig",
}

// discoveryEnv is a control plane of its own whose platform-apiserver runs
// discovery against its kube-apiserver.
type discoveryEnv struct {
	*env
	// want is what the member holds once seeded, which a complete sync
	// mirrors row for row.
	want registryCounts
	// seq numbers the freshness benchmark's namespace changes.
	seq int
	// scrapes counts the metrics benchmark's batches; each is observed one
	// metrics interval after the previous one.
	scrapes int
}

// startDiscoveryEnv starts the discovery environment with its
// platform-apiserver stopped (it has synced the near-empty cluster, which
// the registry still holds), seeds kube-apiserver with nodeCount Nodes,
// syncNamespaces Namespaces and syncPods Pods, and counts what the member
// holds.
func startDiscoveryEnv(b *testing.B) *discoveryEnv {
	d := &discoveryEnv{}
	d.env = benchEnv(b, envOptions{name: "discovery", platformArgs: discoveryArgs, stopPlatform: true, prepare: func(ctx context.Context, e *env) error {
		d.env = e
		now := time.Now().UTC().Truncate(time.Second)
		nodes := seedStep{"Nodes", nodeCount, func(ctx context.Context) error { return e.createKubeNodes(ctx, now) }}
		if err := runSteps(ctx, "discovery: created in kube-apiserver", nodes, e.namespacesStep(syncNamespaces), e.podsStep(syncPods)); err != nil {
			return err
		}
		var err error
		if d.want, err = e.memberCounts(ctx); err != nil {
			return err
		}
		if d.want.nodes != nodeCount || d.want.pods != syncPods || d.want.namespaces < syncNamespaces {
			return fmt.Errorf("kube-apiserver holds %s, want %d nodes, %d pods and at least %d namespaces", d.want, nodeCount, syncPods, syncNamespaces)
		}
		return nil
	}})
	return d
}

// registryCounts counts the member's rows in the registry.
func (d *discoveryEnv) registryCounts(ctx context.Context) (registryCounts, error) {
	var c registryCounts
	err := d.db.QueryRow(ctx, `
		SELECT (SELECT count(*) FROM cluster_namespace WHERE cluster_id = $1),
		       (SELECT count(*) FROM cluster_node WHERE cluster_id = $1),
		       (SELECT count(*) FROM cluster_pod WHERE cluster_id = $1)`,
		discoveryClusterID).Scan(&c.namespaces, &c.nodes, &c.pods)
	if err != nil {
		return c, fmt.Errorf("count registry rows: %w", err)
	}
	return c, nil
}

// registrySnapshot is what tells whether a restart wrote anything: the
// registry's resourceVersion (every changed or deleted view row takes one)
// and a transaction id taken just before, to find rows of any table —
// pods and quotas too, which carry no resourceVersion — written after it.
type registrySnapshot struct {
	rv  int64
	xid string
}

func (d *discoveryEnv) snapshot(ctx context.Context) (registrySnapshot, error) {
	var s registrySnapshot
	// txid_current assigns this (otherwise read-only) statement an xid, so
	// every transaction that commits later has a larger one.
	err := d.db.QueryRow(ctx, `SELECT (SELECT resource_version FROM registry_state), txid_current()::text`).Scan(&s.rv, &s.xid)
	if err != nil {
		return s, fmt.Errorf("read registry state: %w", err)
	}
	return s, nil
}

// rowsWrittenSince counts the member's rows, over every mirrored table,
// inserted or updated by a transaction that began after s (a row's xmin is
// the transaction that wrote it; age() compares transaction ids modulo
// wraparound), and how far the registry's resourceVersion moved.
func (d *discoveryEnv) rowsWrittenSince(ctx context.Context, s registrySnapshot) (rows, rvDelta int64, err error) {
	var rv int64
	err = d.db.QueryRow(ctx, `
		SELECT (SELECT resource_version FROM registry_state),
		       (SELECT count(*) FROM cluster_namespace WHERE cluster_id = $1 AND age(xmin) < age($2::xid))
		     + (SELECT count(*) FROM cluster_node WHERE cluster_id = $1 AND age(xmin) < age($2::xid))
		     + (SELECT count(*) FROM cluster_pod WHERE cluster_id = $1 AND age(xmin) < age($2::xid))
		     + (SELECT count(*) FROM cluster_resource_quota WHERE cluster_id = $1 AND age(xmin) < age($2::xid))`,
		discoveryClusterID, s.xid).Scan(&rv, &rows)
	if err != nil {
		return 0, 0, fmt.Errorf("count rows written: %w", err)
	}
	return rows, rv - s.rv, nil
}

// removeMember removes the member from the registry at once (its rows and
// cursors; the server is stopped), as the registry does once no
// configuration has listed it for the grace period; the server's next
// start lists it anew and syncs it from scratch.
func (d *discoveryEnv) removeMember(ctx context.Context) error {
	res, err := d.registry.ReconcileMembers(ctx, store.MembersView{Unconfigured: []string{discoveryClusterID}})
	if err != nil {
		return fmt.Errorf("remove member %s: %w", discoveryClusterID, err)
	}
	if len(res.Removed) != 1 {
		return fmt.Errorf("remove member %s: the registry answered %+v", discoveryClusterID, res)
	}
	return nil
}
