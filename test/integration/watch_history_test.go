package integration

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/jackc/pgx/v5"

	"github.com/example/platform-apiserver/pkg/apis/platform"
	"github.com/example/platform-apiserver/pkg/apis/platform/v1alpha1"
	"github.com/example/platform-apiserver/pkg/generated/clientset/versioned"
	"github.com/example/platform-apiserver/pkg/registry/store"
)

// historyReadLimit is the server's bound on history queries at once
// (feed.DefaultHistoryReads).
const historyReadLimit = 4

// testResumesBelowTheWindow: 200 watches resume at distinct
// resourceVersions older than the replica's window of recent changes, so
// each needs history from the database. The queries are held at the
// database (the change log locked) long enough to be seen: at most the
// limit run at once, each the kind-filtered statement; together they are
// a handful, not 200; every watch then receives exactly the changes after
// its version. (Their selector names a member: the member-filtered window.)
func (e *env) testResumesBelowTheWindow(t *testing.T) {
	ctx := t.Context()
	const watches = 200
	const cluster = "resumes"
	for i := range watches {
		e.apply(t, store.Batch{ClusterID: cluster, Nodes: []store.Node{node(fmt.Sprintf("r%03d", i))}})
	}
	selector := platform.ClusterLabel + "=" + cluster
	versions := e.nodeVersions(t, selector)
	if len(versions) != watches {
		t.Fatalf("%d nodes of %s, want %d", len(versions), cluster, watches)
	}
	// Push them out of the window (10,000 changes).
	e.burstNodes(t, "window-filler", 0, 10500)
	database := e.metric(t, e.cp.PlatformMetrics, "platform_watch_history_reads_total", `source="database"`)

	// Hold every read of the change log while the watches start.
	lock := e.holdChangeLog(t)

	cfg := e.cp.PlatformDirectConfig()
	cfg.QPS, cfg.Burst = 1000, 1000
	client := versioned.NewForConfigOrDie(cfg).PlatformV1alpha1().NodeCapacities()
	started := make([]watch.Interface, watches)
	errs := make([]error, watches)
	var wg sync.WaitGroup
	for i, v := range versions {
		wg.Go(func() {
			started[i], errs[i] = client.Watch(ctx, metav1.ListOptions{LabelSelector: selector, ResourceVersion: strconv.FormatInt(v.rv, 10)})
		})
	}

	// The history statements waiting on the lock are every one running.
	monitor := e.db(t)
	most, seen := 0, 0
	deadline := time.Now().Add(15 * time.Second)
	for sample := 0; time.Now().Before(deadline) && (seen == 0 || sample < 20); sample++ {
		rows, err := monitor.Query(ctx, `SELECT query FROM pg_stat_activity
			WHERE application_name = 'platform-apiserver-feed' AND state = 'active' AND query LIKE '%registry_change%'`)
		if err != nil {
			t.Fatal(err)
		}
		history := 0
		for rows.Next() {
			var query string
			if err := rows.Scan(&query); err != nil {
				t.Fatal(err)
			}
			switch {
			case strings.Contains(query, "AND kind = $3 AND cluster_id = $4"):
				history++ // the member-filtered window: a history read
			case strings.Contains(query, "c.kind = $3"):
				history++ // a kind's entries, after its window
			case strings.Contains(query, "ORDER BY resource_version LIMIT $2"):
				// the follower's own read of every kind
			default:
				t.Errorf("a change-log query that is neither the follower's nor a kind-filtered history read:\n%s", query)
			}
		}
		rows.Close()
		most = max(most, history)
		if history > 0 {
			seen++
		}
		time.Sleep(50 * time.Millisecond)
	}
	if seen == 0 {
		t.Fatal("no history query reached the database while 200 watches resumed below the window")
	}
	if most > historyReadLimit {
		t.Errorf("%d history queries ran at once, want at most %d", most, historyReadLimit)
	}
	if err := lock.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("watch from %d: %v", versions[i].rv, err)
		}
		defer started[i].Stop()
	}

	// A change after the resumes: every watch ends with it.
	e.apply(t, store.Batch{ClusterID: cluster, Nodes: []store.Node{node("r-last")}})
	last := cluster + ".r-last"
	var mu sync.Mutex
	var problems []string
	for i, v := range versions {
		wg.Go(func() {
			var want []string
			for _, later := range versions[i+1:] {
				want = append(want, later.name)
			}
			want = append(want, last)
			got := receiveUntil(ctx, started[i], last, time.Minute)
			if !slices.Equal(got, want) {
				mu.Lock()
				problems = append(problems, fmt.Sprintf("watch from %d (after %s): %d events %v..., want %d", v.rv, v.name, len(got), head(got, 3), len(want)))
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	for _, p := range problems[:min(len(problems), 5)] {
		t.Error(p)
	}
	queries := e.metric(t, e.cp.PlatformMetrics, "platform_watch_history_reads_total", `source="database"`) - database
	t.Logf("%d watches resumed below the window with %v history queries, at most %d at once", watches, queries, most)
	if queries > watches/10 {
		t.Errorf("%v history queries for %d resumes of one kind and member, want them shared (a handful)", queries, watches)
	}
}

// holdChangeLog locks the change log against every read until the
// returned transaction ends (at the latest with the test).
func (e *env) holdChangeLog(t *testing.T) pgx.Tx {
	t.Helper()
	lock, err := e.db(t).Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lock.Rollback(context.Background()) })
	if _, err := lock.Exec(t.Context(), `LOCK TABLE registry_change IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	return lock
}

// nodeVersion is a NodeCapacity's resourceVersion and name.
type nodeVersion struct {
	rv   int64
	name string
}

// nodeVersions lists the NodeCapacities selector selects, in the order of
// their versions.
func (e *env) nodeVersions(t *testing.T, selector string) []nodeVersion {
	t.Helper()
	nodes, err := e.platform.PlatformV1alpha1().NodeCapacities().List(t.Context(), metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		t.Fatal(err)
	}
	var versions []nodeVersion
	for _, nc := range nodes.Items {
		rv, err := strconv.ParseInt(nc.ResourceVersion, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		versions = append(versions, nodeVersion{rv, nc.Name})
	}
	slices.SortFunc(versions, func(a, b nodeVersion) int { return cmp.Compare(a.rv, b.rv) })
	return versions
}

// receiveUntil returns the names of the ADDED events w delivers until the
// one named last (included), or until timeout.
func receiveUntil(ctx context.Context, w watch.Interface, last string, timeout time.Duration) []string {
	var names []string
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				return append(names, "(closed)")
			}
			nc, isNode := ev.Object.(*v1alpha1.NodeCapacity)
			if !isNode || ev.Type != watch.Added {
				return append(names, fmt.Sprintf("(%s %T)", ev.Type, ev.Object))
			}
			if names = append(names, nc.Name); nc.Name == last {
				return names
			}
		case <-timer.C:
			return append(names, "(timeout)")
		case <-ctx.Done():
			return names
		}
	}
}

func head(s []string, n int) []string { return s[:min(len(s), n)] }

// testTenantResumes: one tenant (not exempt from priority and fairness, as
// none of these users is) resumes 60 watches from versions below the
// window, each with a cluster label no member has: 60 history reads, one
// per filter. While they hold every turn, another tenant and a fleet viewer
// resume watches below the window too. The database is held (the change
// log locked) until every read is queued. Then: the tenant's reads are the
// member-filtered statement (answered from the change log's (kind, member)
// index: a member the registry does not hold costs an index probe, not a
// walk of the retained log); every other user's watch opens and receives
// exactly the changes after its version; none of the tenant's watches
// fails or receives anything. Runs after testResumesBelowTheWindow, whose
// nodes it resumes from.
func (e *env) testTenantResumes(t *testing.T) {
	ctx := t.Context()
	const (
		noisy   = 60
		others  = 10
		cluster = "resumes"
	)
	userNames := []string{"resuming-tenant", "other-tenant", "fleet-viewer"}
	users := e.listWatchUsers(t, userNames...)
	clients := make([]versioned.Interface, len(users))
	for i, cfg := range users {
		clients[i] = versioned.NewForConfigOrDie(cfg)
	}
	byVersion := e.nodeVersions(t, platform.ClusterLabel+"="+cluster)
	versions, names := make([]int64, len(byVersion)), make([]string, len(byVersion))
	for i, v := range byVersion {
		versions[i], names[i] = v.rv, v.name
	}
	if len(versions) < noisy+2*others {
		t.Fatalf("%d nodes of %s to resume from, want %d", len(versions), cluster, noisy+2*others)
	}
	// Below the window: 10,000 changes after the newest.
	e.burstNodes(t, "tenant-filler", 0, 10500)

	lock := e.holdChangeLog(t)

	type resume struct {
		client   int
		selector string
		from     int64
		w        watch.Interface
		err      error
	}
	var resumes []*resume
	for i := range noisy {
		resumes = append(resumes, &resume{client: 0, selector: fmt.Sprintf("%s=absent-%d", platform.ClusterLabel, i), from: versions[i]})
	}
	var wg sync.WaitGroup
	open := func(rs []*resume) {
		for _, r := range rs {
			wg.Go(func() {
				r.w, r.err = clients[r.client].PlatformV1alpha1().NodeCapacities().Watch(ctx,
					metav1.ListOptions{LabelSelector: r.selector, ResourceVersion: strconv.FormatInt(r.from, 10)})
			})
		}
	}
	open(resumes)
	monitor := e.db(t)
	memberQueries := func() (member int) {
		rows, err := monitor.Query(ctx, `SELECT query FROM pg_stat_activity
			WHERE application_name = 'platform-apiserver-feed' AND state = 'active' AND query LIKE '%registry_change%'`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		for rows.Next() {
			var query string
			if err := rows.Scan(&query); err != nil {
				t.Fatal(err)
			}
			if strings.Contains(query, "AND kind = $3 AND cluster_id = $4") {
				member++
			}
		}
		return member
	}
	eventually(t, "the tenant's history reads to take every turn", 30*time.Second, func(context.Context) (bool, string) {
		member := memberQueries()
		return member == historyReadLimit, fmt.Sprintf("%d member-filtered history reads at the database, want %d", member, historyReadLimit)
	})

	// The other users resume while the tenant's 56 other reads wait.
	var rest []*resume
	for j := range others {
		rest = append(rest,
			&resume{client: 1, selector: platform.ClusterLabel + "=" + cluster, from: versions[noisy+j]},
			// A set-based selector: the fleet viewer's reads are of the kind.
			&resume{client: 2, selector: platform.ClusterLabel + " in (" + cluster + ")", from: versions[noisy+others+j]})
	}
	open(rest)
	time.Sleep(time.Second)
	if err := lock.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	for _, r := range append(slices.Clone(resumes), rest...) {
		if r.err != nil {
			t.Fatalf("user %s's watch from %d (%q): %v", userNames[r.client], r.from, r.selector, r.err)
		}
		defer r.w.Stop()
	}

	// A change after the resumes: the others' watches end with it.
	e.apply(t, store.Batch{ClusterID: cluster, Nodes: []store.Node{node("t-last")}})
	last := cluster + ".t-last"
	var mu sync.Mutex
	var problems []string
	for _, r := range rest {
		wg.Go(func() {
			got := receiveUntil(ctx, r.w, last, time.Minute)
			var want []string
			for i, rv := range versions {
				if rv > r.from {
					want = append(want, names[i])
				}
			}
			want = append(want, last)
			if !slices.Equal(got, want) {
				mu.Lock()
				problems = append(problems, fmt.Sprintf("user %s's watch from %d: %d events %v..., want %d", userNames[r.client], r.from, len(got), head(got, 3), len(want)))
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	for _, p := range problems[:min(len(problems), 5)] {
		t.Error(p)
	}
	for _, r := range resumes {
		select {
		case ev, ok := <-r.w.ResultChan():
			t.Errorf("the tenant's watch %q from %d received %v (open %v), want nothing", r.selector, r.from, ev.Type, ok)
		default:
		}
	}
}
