package changelog_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/example/platform-apiserver/pkg/registry/postgres"
	"github.com/example/platform-apiserver/pkg/registry/postgres/internal/pgtesting"
	"github.com/example/platform-apiserver/pkg/registry/postgres/internal/registrytest"
	"github.com/example/platform-apiserver/pkg/registry/store"
)

// TestChangeFeedChurn runs concurrent writers of every kind of change while a
// reader tails the feed with small pages. The reader must see strictly
// increasing versions, every log entry exactly once, each change consistent
// with the one before it for the same object, and end at the registry's
// version with a replayed state equal to a final list.
func TestChangeFeedChurn(t *testing.T) {
	t.Parallel()
	s, b := registrytest.Setup(t, postgres.Options{})
	ctx := b.Ctx
	const writers, rounds, limit = 8, 40, 5

	done := make(chan struct{})
	type tailResult struct {
		changes []store.Change
		pages   int
		err     error
	}
	tailed := make(chan tailResult, 1)
	go func() {
		var out []store.Change
		var after int64
		for pages := 0; ; pages++ {
			finished := isClosed(done)
			page, readAt, err := s.Changes(ctx, store.ChangeFilter{}, after, limit)
			if err != nil {
				tailed <- tailResult{err: err}
				return
			}
			for _, c := range page {
				if c.ResourceVersion <= after || c.ResourceVersion > readAt {
					tailed <- tailResult{err: fmt.Errorf("change %d outside (%d, %d]", c.ResourceVersion, after, readAt)}
					return
				}
				after = c.ResourceVersion
			}
			out = append(out, page...)
			if len(page) < limit {
				// Short page: everything up to readAt has been read.
				after = readAt
				if finished {
					tailed <- tailResult{changes: out, pages: pages}
					return
				}
			}
		}
	}()

	start := time.Now()
	errs := make(chan error, writers)
	for w := range writers {
		go func() { errs <- churn(ctx, s, w, rounds) }()
	}
	for range writers {
		if err := <-errs; err != nil {
			t.Fatalf("writer: %v", err)
		}
	}
	writing := time.Since(start)
	close(done)
	res := <-tailed
	if res.err != nil {
		t.Fatalf("tail: %v", res.err)
	}
	changes := res.changes

	// Every entry exactly once, in order.
	conn, err := pgx.Connect(ctx, b.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	rows, _ := conn.Query(ctx, `SELECT resource_version FROM registry_change ORDER BY resource_version`)
	logged, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		t.Fatal(err)
	}
	if got := rvs(changes); !slices.Equal(got, logged) {
		t.Fatalf("tail read %d changes, log holds %d; first difference at %d", len(got), len(logged), firstDiff(got, logged))
	}
	final := registrytest.RegistryRV(t, s, ctx)
	if last := logged[len(logged)-1]; last > final {
		t.Fatalf("last entry %d above the registry version %d", last, final)
	}
	var ahead int64
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM cluster_node WHERE resource_version > $1`, final).Scan(&ahead); err != nil || ahead != 0 {
		t.Errorf("%d nodes (%v) stamped above the registry version %d: want none", ahead, err, final)
	}

	// Replaying the feed gives the final state.
	state := map[string]any{}
	replay(t, state, changes)
	want := viewState(t, s, ctx)
	if len(state) != len(want) {
		t.Errorf("replayed %d objects, the registry holds %d", len(state), len(want))
	}
	for k, v := range want {
		if !reflect.DeepEqual(state[k], v) {
			t.Errorf("%s: replayed\n%+v\nlisted\n%+v", k, state[k], v)
		}
	}
	types := map[store.ChangeType]int{}
	for _, c := range changes {
		types[c.Type]++
	}
	t.Logf("%d writers × %d rounds in %v: %d changes %v read in %d pages, registry RV %d",
		writers, rounds, writing.Round(time.Millisecond), len(changes), types, res.pages, final)
}

// churn makes rounds of random changes to cluster c<w>: nodes added,
// relabelled, deleted and re-added (also in one batch), pods added and
// moved, namespaces deleted with their pods, relists, metrics samples.
func churn(ctx context.Context, s *postgres.Store, w, rounds int) error {
	rng := rand.New(rand.NewPCG(uint64(w), 42))
	cluster := fmt.Sprintf("c%d", w)
	nodeName := func() string { return fmt.Sprintf("n%d", rng.IntN(4)) }
	nsName := func() string { return fmt.Sprintf("ns%d", rng.IntN(3)) }
	for r := range rounds {
		var err error
		switch op := rng.IntN(8); op {
		case 0, 1:
			b := store.Batch{ClusterID: cluster}
			for range 1 + rng.IntN(3) {
				b.Nodes = append(b.Nodes, registrytest.WithLabel(pgtesting.Node(nodeName(), 1000, 1<<30), "v", fmt.Sprint(rng.IntN(3))))
			}
			b.Namespaces = []store.Namespace{pgtesting.Namespace(nsName())}
			err = s.Apply(ctx, b)
		case 2, 3:
			var pods []store.Pod
			for range 1 + rng.IntN(4) {
				pods = append(pods, pgtesting.Pod(nsName(), fmt.Sprintf("p%d", rng.IntN(6)), nodeName(), int64(100*rng.IntN(4)), 1<<20))
			}
			err = s.Apply(ctx, store.Batch{ClusterID: cluster, Pods: pods})
		case 4:
			n := nodeName()
			b := store.Batch{ClusterID: cluster, Deleted: store.Keys{store.ResourceNodes: {{Name: n}}}}
			if rng.IntN(2) == 0 {
				b.Nodes = []store.Node{pgtesting.Node(n, 2000, 1<<30)} // deleted and re-added
			}
			err = s.Apply(ctx, b)
		case 5:
			err = s.Apply(ctx, store.Batch{ClusterID: cluster, Deleted: store.Keys{store.ResourceNamespaces: {{Name: nsName()}}}})
		case 6:
			err = s.Apply(ctx, store.Batch{ClusterID: cluster, Replace: []store.Resource{store.ResourceNodes},
				Nodes: []store.Node{pgtesting.Node(nodeName(), 1000, 1<<30), pgtesting.Node(nodeName(), 1000, 1<<30)}})
		case 7:
			_, err = s.RecordNodeMetrics(ctx, store.Fence{ClusterID: cluster}, []store.NodeMetricsSample{{ClusterID: cluster, Node: nodeName(),
				CPUNanoCores: int64(rng.IntN(1e6)), MemoryBytes: 1 << 20, ObservedAt: time.Unix(int64(1e9+r), 0), Window: time.Second}}, registrytest.ReportEvery)
		}
		if err != nil {
			return fmt.Errorf("%s round %d: %w", cluster, r, err)
		}
	}
	return nil
}

func isClosed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func firstDiff(a, b []int64) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}
