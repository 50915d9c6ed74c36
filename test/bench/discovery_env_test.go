package bench

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/example/platform-apiserver/pkg/registry/store"
)

const (
	// discoveryClusterID is the member mirrored: the environment's own
	// kube-apiserver, seeded with nodeCount Nodes, syncNamespaces Namespaces
	// and syncPods Pods (pod j on node j%nodeCount, in namespace
	// j/podsPerSyncNamespace).
	discoveryClusterID   = "local"
	syncNamespaces       = 10000
	syncPods             = 50000
	podsPerSyncNode      = syncPods / nodeCount
	podsPerSyncNamespace = syncPods / syncNamespaces
)

// discoveryArgs mirror the framework's kube-apiserver (whose kubeconfig is
// in the working directory) as member "local"; all else is the default.
var discoveryArgs = []string{"--cluster-id=" + discoveryClusterID, "--kubeconfig=kubeconfig"}

// discoveryEnv is a control plane of its own whose server runs discovery.
type discoveryEnv struct {
	*env
	want    registryCounts // the seeded member, which a sync mirrors row for row
	seq     int            // the freshness changes
	scrapes int            // the metrics scrapes, one interval apart
}

// startDiscoveryEnv starts the environment with its server stopped (after
// syncing the near-empty cluster), seeds kube-apiserver and counts it.
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

// registrySnapshot is the registry's resourceVersion and a transaction id
// (txid_current assigns one), to find rows of any table written after it.
type registrySnapshot struct {
	rv  int64
	xid string
}

func (d *discoveryEnv) snapshot(ctx context.Context) (registrySnapshot, error) {
	var s registrySnapshot
	err := d.db.QueryRow(ctx, `SELECT (SELECT resource_version FROM registry_state), txid_current()::text`).Scan(&s.rv, &s.xid)
	if err != nil {
		return s, fmt.Errorf("read registry state: %w", err)
	}
	return s, nil
}

// rowsWrittenSince counts the member's rows whose xmin is after s, and how
// far the resourceVersion moved.
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

// removeMember removes the member's rows and cursors (the server stopped),
// so the next start syncs it from scratch.
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
