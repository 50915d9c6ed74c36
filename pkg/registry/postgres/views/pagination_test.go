package views_test

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/example/platform-apiserver/pkg/registry/postgres"
	"github.com/example/platform-apiserver/pkg/registry/postgres/internal/pgtesting"
	"github.com/example/platform-apiserver/pkg/registry/postgres/internal/registrytest"
	"github.com/example/platform-apiserver/pkg/registry/store"
)

func TestPagination(t *testing.T) {
	t.Parallel()
	s, b := registrytest.Setup(t, postgres.Options{})
	ctx := b.Ctx
	var want []string
	// 25 nodes over clusters whose bytewise order differs from a locale's ("B" < "a").
	clusters := []string{"a", "B", "c-1"}
	for i := range 25 {
		c := clusters[i%3]
		name := fmt.Sprintf("node-%02d", i)
		if i%5 == 0 {
			name = "N" + name
		}
		registrytest.MustApply(t, s, ctx, store.Batch{ClusterID: c, Nodes: []store.Node{pgtesting.Node(name, 1000, 1)},
			Namespaces: []store.Namespace{pgtesting.Namespace(name)}})
		want = append(want, c+"."+name)
	}
	sort.Strings(want) // bytewise, as the list orders

	var got []string
	opts := store.ListOptions{Limit: 7}
	pages, firstRV := 0, int64(0)
	for {
		p := registrytest.ListNodes(t, s, ctx, opts)
		pages++
		if pages == 1 {
			firstRV = p.ResourceVersion
			// A write between pages does not change the list's version.
			registrytest.MustApply(t, s, ctx, store.Batch{ClusterID: "zzz", Nodes: []store.Node{pgtesting.Node("late", 1, 1)}})
		} else if p.ResourceVersion != firstRV {
			t.Errorf("page %d RV %d, want the first page's %d", pages, p.ResourceVersion, firstRV)
		}
		if len(p.Items) > 7 {
			t.Fatalf("page %d has %d items", pages, len(p.Items))
		}
		for _, n := range p.Items {
			got = append(got, n.ClusterID+"."+n.Node.Name)
		}
		if p.Continue == "" {
			break
		}
		opts.Continue = p.Continue
	}
	want = append(want, "zzz.late") // written before the last page was read
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("paged list:\n got %v\nwant %v", got, want)
	}
	if pages != 4 {
		t.Errorf("%d pages, want 4", pages)
	}

	// Namespaces page by (namespace, cluster).
	var nsGot []string
	nsOpts := store.ListOptions{Limit: 4, Labels: mustRequirements(t, "team")}
	for {
		p, err := s.ClusterNamespaces().List(ctx, nsOpts)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range p.Items {
			nsGot = append(nsGot, n.Namespace.Name+"/"+n.ClusterID)
		}
		if p.Continue == "" {
			break
		}
		nsOpts.Continue = p.Continue
	}
	if len(nsGot) != 25 || !sort.StringsAreSorted(nsGot) {
		t.Errorf("paged namespaces (%d): %v", len(nsGot), nsGot)
	}

	// An exact multiple of the limit ends without an empty extra page.
	p := registrytest.ListNodes(t, s, ctx, store.ListOptions{Limit: 26})
	if p.Continue != "" || len(p.Items) != 26 {
		t.Errorf("limit = count: %d items, continue %q", len(p.Items), p.Continue)
	}
}

func mustRequirements(t *testing.T, sel string) labels.Requirements {
	t.Helper()
	reqs, err := labels.ParseToRequirements(sel)
	if err != nil {
		t.Fatal(err)
	}
	return reqs
}

func TestContinueTokens(t *testing.T) {
	t.Parallel()
	now := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	s, b := registrytest.Setup(t, postgres.Options{ContinueTTL: time.Minute, Now: func() time.Time { return clock() }})
	ctx := b.Ctx
	registrytest.MustApply(t, s, ctx, store.Batch{ClusterID: "c", Nodes: []store.Node{pgtesting.Node("a", 1, 1), pgtesting.Node("b", 1, 1), pgtesting.Node("c", 1, 1)},
		Namespaces: []store.Namespace{pgtesting.Namespace("a"), pgtesting.Namespace("b")}})
	first := registrytest.ListNodes(t, s, ctx, store.ListOptions{Limit: 1})
	if first.Continue == "" {
		t.Fatal("no continue token")
	}
	tampered := []byte(first.Continue)
	tampered[len(tampered)/2] ^= 0x01
	if tampered[len(tampered)/2] == first.Continue[len(tampered)/2] {
		t.Fatal("tamper failed")
	}

	tests := []struct {
		name  string
		token string
		later time.Duration
		list  func(store.ListOptions) error
		want  error
	}{
		{name: "valid", token: first.Continue, list: listNodesErr(s, b), want: nil},
		{name: "tampered", token: string(tampered), list: listNodesErr(s, b), want: store.ErrInvalidContinue},
		{name: "garbage", token: "not a token", list: listNodesErr(s, b), want: store.ErrInvalidContinue},
		{name: "other kind", token: first.Continue, list: func(o store.ListOptions) error {
			_, err := s.ClusterNamespaces().List(ctx, o)
			return err
		}, want: store.ErrInvalidContinue},
		{name: "expired", token: first.Continue, later: 2 * time.Minute, list: listNodesErr(s, b), want: store.ErrExpiredContinue},
	}
	for _, tc := range tests {
		clock = func() time.Time { return now.Add(tc.later) }
		err := tc.list(store.ListOptions{Limit: 1, Continue: tc.token})
		if (tc.want == nil) != (err == nil) || !errors.Is(err, tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, err, tc.want)
		}
	}

	// A token issued by another replica (another Store on the same database) is honoured.
	clock = func() time.Time { return now }
	other, err := postgres.Open(ctx, b.DSN, postgres.Options{Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if _, err := other.NodeCapacities().List(ctx, store.ListOptions{Limit: 1, Continue: first.Continue}); err != nil {
		t.Errorf("token from another replica: %v", err)
	}

	// One issued by another registry (another database, as after a
	// re-create) has expired: the client restarts its list (410).
	recreated, rb := registrytest.Setup(t, postgres.Options{Now: clock})
	registrytest.MustApply(t, recreated, rb.Ctx, store.Batch{ClusterID: "c", Nodes: []store.Node{pgtesting.Node("a", 1, 1), pgtesting.Node("b", 1, 1)}})
	foreign := registrytest.ListNodes(t, recreated, rb.Ctx, store.ListOptions{Limit: 1})
	if _, err := s.NodeCapacities().List(ctx, store.ListOptions{Limit: 1, Continue: foreign.Continue}); !errors.Is(err, store.ErrExpiredContinue) {
		t.Errorf("token from another registry: got %v, want %v", err, store.ErrExpiredContinue)
	}
}

func listNodesErr(s *postgres.Store, b registrytest.Bundle) func(store.ListOptions) error {
	return func(o store.ListOptions) error {
		_, err := s.NodeCapacities().List(b.Ctx, o)
		return err
	}
}
