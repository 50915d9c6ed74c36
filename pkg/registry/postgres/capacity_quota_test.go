package postgres_test

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/example/platform-apiserver/pkg/registry/clustercapacity"
	"github.com/example/platform-apiserver/pkg/registry/postgres"
	"github.com/example/platform-apiserver/pkg/registry/store"
)

// ruleQuotas is what the committed quota rule reads of a ClusterNamespace's
// quotas (clustercapacity.Quota), parsed from the registry's strings.
func ruleQuotas(t *testing.T, ns store.ClusterNamespace) []clustercapacity.Quota {
	t.Helper()
	parse := func(in map[string]string) map[string]resource.Quantity {
		out := map[string]resource.Quantity{}
		for k, v := range in {
			q, err := resource.ParseQuantity(v)
			if err != nil {
				t.Fatalf("namespace %s: quantity %s=%q: %v", ns.Namespace.Name, k, v, err)
			}
			out[k] = q
		}
		return out
	}
	var out []clustercapacity.Quota
	for _, q := range ns.Quotas {
		out = append(out, clustercapacity.Quota{Name: q.Name, Hard: parse(q.Hard), Used: parse(q.Used), Scoped: len(q.Scopes) > 0})
	}
	return out
}

// registryCommitment parses the registry's committed sums (decimal texts).
func registryCommitment(t *testing.T, c store.QuotaCommitment) clustercapacity.Commitment {
	t.Helper()
	parse := func(in map[string]string) map[string]resource.Quantity {
		if len(in) == 0 {
			return nil
		}
		out := map[string]resource.Quantity{}
		for k, v := range in {
			q, err := resource.ParseQuantity(v)
			if err != nil {
				t.Fatalf("committed %s=%q: %v", k, v, err)
			}
			out[k] = q
		}
		return out
	}
	return clustercapacity.Commitment{Hard: parse(c.Hard), Used: parse(c.Used), ScopedHard: parse(c.ScopedHard), ScopedUsed: parse(c.ScopedUsed)}
}

func quota(ns, name string, hard, used map[string]string, scopes ...string) store.Quota {
	return store.Quota{Namespace: ns, Name: name, Hard: hard, Used: used, Scopes: scopes}
}

// TestClusterCapacityCommittedQuota: a member's committed quota equals the
// rule (clustercapacity.MemberCommitment, written apart from the SQL) over
// its ClusterNamespaces' quotas after every write — several quotas in one
// namespace, scoped ones, quotas changed, deleted, namespaces deleted — and
// at every version of the change feed; a quota change moves it in one
// change, and writes that change no committed amount leave it alone.
func TestClusterCapacityCommittedQuota(t *testing.T) {
	t.Parallel()
	s, b := setup(t, postgres.Options{})
	ctx := b.Ctx
	start := registryRV(t, s, ctx)
	type m = map[string]string
	steps := []struct {
		name  string
		batch store.Batch
		// cc: whether member a's ClusterCapacity changes; moves: whether its
		// committed quota does
		cc, moves bool
	}{
		{"namespaces with quotas", store.Batch{
			Nodes:      []store.Node{node("n1", 4000, 8<<30)},
			Namespaces: []store.Namespace{namespace("x"), namespace("y"), namespace("z"), namespace("w")},
			Quotas: []store.Quota{
				// two quotas in x: the lesser hard of each resource binds
				quota("x", "compute", m{"requests.cpu": "4", "requests.memory": "8Gi", "pods": "10", "limits.cpu": "8"},
					m{"requests.cpu": "1500m", "requests.memory": "1Gi", "pods": "3", "limits.cpu": "3"}),
				quota("x", "tight", m{"cpu": "2", "count/configmaps": "5"}, m{"cpu": "1500m", "count/configmaps": "1"}),
				// y: only a scoped quota limits cpu and GPUs, an unscoped one memory
				quota("y", "high", m{"requests.cpu": "3", "requests.nvidia.com/gpu": "2", "requests.memory": "64Gi"},
					m{"requests.cpu": "500m", "requests.nvidia.com/gpu": "1"}, "PriorityClass In high"),
				quota("y", "best-effort", m{"pods": "4"}, m{"pods": "1"}, "BestEffort"),
				quota("y", "memory", m{"requests.memory": "2Gi"}, m{"requests.memory": "512Mi"}),
				// z: storage and object counts commit nothing on pods
				quota("z", "storage", m{"requests.storage": "100Gi", "persistentvolumeclaims": "4"}, m{"requests.storage": "10Gi"}),
			}}, true, true},
		{"a quota's hard raised past the other's", store.Batch{Quotas: []store.Quota{
			quota("x", "tight", m{"cpu": "5", "count/configmaps": "5"}, m{"cpu": "1500m", "count/configmaps": "1"})}}, true, true},
		{"usage moves", store.Batch{Quotas: []store.Quota{
			quota("x", "compute", m{"requests.cpu": "4", "requests.memory": "8Gi", "pods": "10", "limits.cpu": "8"},
				m{"requests.cpu": "2500m", "requests.memory": "3Gi", "pods": "4", "limits.cpu": "5"})}}, true, true},
		{"an object count moves: nothing committed changes", store.Batch{Quotas: []store.Quota{
			quota("x", "tight", m{"cpu": "5", "count/configmaps": "5"}, m{"cpu": "1500m", "count/configmaps": "2"})}}, false, false},
		{"pods start in a namespace with quotas", store.Batch{Pods: []store.Pod{pod("x", "p1", "n1", 500, 1<<30), pod("y", "p2", "", 100, 1<<20)}}, true, false},
		{"an unscoped quota for cpu in y: the scoped one stops counting for it", store.Batch{Quotas: []store.Quota{
			quota("y", "cpu", m{"requests.cpu": "6"}, m{"requests.cpu": "600m"})}}, true, true},
		{"a second scoped quota in w", store.Batch{Quotas: []store.Quota{
			quota("w", "gpu-a", m{"requests.nvidia.com/gpu": "1"}, nil, "PriorityClass In a"),
			quota("w", "gpu-b", m{"requests.nvidia.com/gpu": "3"}, m{"requests.nvidia.com/gpu": "3"}, "PriorityClass NotIn a")}}, true, true},
		{"a quota deleted", store.Batch{Deleted: store.Keys{store.ResourceResourceQuotas: {{Namespace: "x", Name: "compute"}}}}, true, true},
		{"a namespace deleted with its quotas", store.Batch{Deleted: store.Keys{
			store.ResourceNamespaces:     {{Name: "y"}},
			store.ResourcePods:           {{Namespace: "y", Name: "p2"}},
			store.ResourceResourceQuotas: {{Namespace: "y", Name: "high"}, {Namespace: "y", Name: "best-effort"}, {Namespace: "y", Name: "memory"}, {Namespace: "y", Name: "cpu"}}}}, true, true},
		{"the last quotas deleted", store.Batch{Deleted: store.Keys{store.ResourceResourceQuotas: {
			{Namespace: "x", Name: "tight"}, {Namespace: "z", Name: "storage"}, {Namespace: "w", Name: "gpu-a"}, {Namespace: "w", Name: "gpu-b"}}}}, true, true},
	}
	sel := []store.FieldRequirement{{Field: store.FieldColumns{Path: "status.cluster", Columns: []string{"cluster_id"}}, Op: "=", Value: "a"}}
	var last store.QuotaCommitment
	for i, step := range steps {
		before := registryRV(t, s, ctx)
		step.batch.ClusterID = "a"
		mustApply(t, s, ctx, step.batch)
		nss, err := s.ClusterNamespaces().List(ctx, store.ListOptions{Fields: sel})
		if err != nil {
			t.Fatal(err)
		}
		var quotas [][]clustercapacity.Quota
		for _, ns := range nss.Items {
			quotas = append(quotas, ruleQuotas(t, ns))
		}
		got := mustCapacity(t, s, ctx, "a")
		want := clustercapacity.MemberCommitment(quotas)
		if !registryCommitment(t, got.Committed).Equal(want) {
			t.Errorf("%s: committed %+v\nwant the rule over the namespaces' quotas %+v", step.name, got.Committed, want)
		}
		if i == 0 && (len(want.Hard) == 0 || len(want.ScopedHard) == 0) {
			t.Fatalf("the first step commits %+v: want unscoped and scoped amounts", want)
		}
		changes, _, err := s.Changes(ctx, store.ChangeFilter{}, before, 1000)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, c := range changes {
			if c.Kind == store.KindClusterCapacity && asCapacity(c.Object).ClusterID == "a" {
				n++
			}
		}
		if step.cc && n != 1 || !step.cc && n != 0 {
			t.Errorf("%s: %d ClusterCapacity changes, want %d", step.name, n, map[bool]int{true: 1}[step.cc])
		}
		if moved := !registryCommitment(t, got.Committed).Equal(registryCommitment(t, last)); moved != step.moves {
			t.Errorf("%s: committed moved = %t, want %t (%+v)", step.name, moved, step.moves, got.Committed)
		}
		last = got.Committed
	}
	if c := mustCapacity(t, s, ctx, "a").Committed; c.Hard != nil || c.Used != nil || c.ScopedHard != nil || c.ScopedUsed != nil {
		t.Errorf("no quota left: committed %+v, want none", c)
	}

	// The feed, replayed: at each ClusterCapacity change the committed
	// quota is the rule over the ClusterNamespaces replayed so far.
	changes, _, err := s.Changes(ctx, store.ChangeFilter{}, start, 10000)
	if err != nil {
		t.Fatal(err)
	}
	nss := map[string]store.ClusterNamespace{}
	checked := 0
	for _, c := range changes {
		switch c.Kind {
		case store.KindClusterNamespace:
			n := asNamespace(c.Object)
			if c.Type == store.ChangeDeleted {
				delete(nss, n.Namespace.Name)
			} else {
				nss[n.Namespace.Name] = *n
			}
		case store.KindClusterCapacity:
			checked++
			var quotas [][]clustercapacity.Quota
			for _, ns := range nss {
				quotas = append(quotas, ruleQuotas(t, ns))
			}
			if got, want := registryCommitment(t, asCapacity(c.Object).Committed), clustercapacity.MemberCommitment(quotas); !got.Equal(want) {
				t.Errorf("feed at %d: committed %+v\nwant the rule over the namespaces replayed so far %+v", c.ResourceVersion, got, want)
			}
		}
	}
	if checked < 9 {
		t.Errorf("checked %d ClusterCapacity changes, want one per changing step", checked)
	}
}

// TestRegistryQuantity: the registry reads every form of a canonical
// quantity string as resource.Quantity does.
func TestRegistryQuantity(t *testing.T) {
	t.Parallel()
	_, b := setup(t, postgres.Options{})
	conn := b.Connect(t)
	for _, in := range []string{"0", "1", "500m", "1500m", "2", "1Gi", "1536Mi", "8Ei", "1k", "12M", "3G", "4T", "5P", "6E",
		"100n", "250u", "1e3", "12e6", "1.5", "2Ki", "7Ti", "9Pi", "123456789012345"} {
		want := resource.MustParse(in)
		var got string
		if err := conn.QueryRow(b.Ctx, `SELECT registry_quantity($1)::text`, want.String()).Scan(&got); err != nil {
			t.Fatalf("%s: %v", in, err)
		}
		if q, err := resource.ParseQuantity(got); err != nil || q.Cmp(want) != 0 {
			t.Errorf("registry_quantity(%q) = %q (%v), want %s", want.String(), got, err, want.AsDec())
		}
	}
	var null *string
	if err := conn.QueryRow(b.Ctx, `SELECT registry_quantity('lots')::text`).Scan(&null); err != nil || null != nil {
		t.Errorf("registry_quantity('lots') = %v, %v; want NULL", null, err)
	}
}
