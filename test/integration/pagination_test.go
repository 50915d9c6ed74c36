package integration

import (
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/example/platform-apiserver/pkg/registry/postgres"
	"github.com/example/platform-apiserver/pkg/registry/store"
	pgtest "github.com/example/platform-apiserver/test/framework/postgres"
)

func (e *env) testPagination(t *testing.T) {
	ctx := t.Context()
	full, err := e.platform.PlatformV1alpha1().NodeCapacities().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, nc := range full.Items {
		want = append(want, nc.Name)
	}

	t.Run("clientset pages cover the list once, in order", func(t *testing.T) {
		var got []string
		opts := metav1.ListOptions{Limit: 5}
		pages := 0
		for {
			page, err := e.platform.PlatformV1alpha1().NodeCapacities().List(ctx, opts)
			if err != nil {
				t.Fatalf("page %d: %v", pages, err)
			}
			pages++
			if len(page.Items) > 5 {
				t.Fatalf("page %d has %d items, limit 5", pages, len(page.Items))
			}
			if page.ResourceVersion != full.ResourceVersion {
				t.Errorf("page %d resourceVersion %s, want the first page's %s", pages, page.ResourceVersion, full.ResourceVersion)
			}
			for _, nc := range page.Items {
				got = append(got, nc.Name)
			}
			if page.Continue == "" {
				break
			}
			opts.Continue = page.Continue
		}
		if !slices.Equal(got, want) {
			t.Errorf("paged names = %v\nwant %v", got, want)
		}
		if pages != (fixtureNodes+4)/5 {
			t.Errorf("%d pages, want %d", pages, (fixtureNodes+4)/5)
		}
	})

	t.Run("kubectl --chunk-size", func(t *testing.T) {
		out := e.kubectl(t, "get", "nc", "--chunk-size=4", "-o", "name")
		if got := strings.Fields(out); len(got) != fixtureNodes {
			t.Errorf("--chunk-size=4 listed %d objects, want %d", len(got), fixtureNodes)
		}
		out = e.kubectl(t, "get", "cns", "-A", "--chunk-size=1", "-o", "name")
		if got := strings.Fields(out); len(got) != 3 {
			t.Errorf("clusternamespaces --chunk-size=1 listed %d, want 3: %v", len(got), got)
		}
	})

	t.Run("tampered token is 400", func(t *testing.T) {
		first, err := e.platform.PlatformV1alpha1().NodeCapacities().List(ctx, metav1.ListOptions{Limit: 2})
		if err != nil {
			t.Fatal(err)
		}
		tok := []byte(first.Continue)
		tok[len(tok)/2] ^= 0x01
		for _, bad := range []string{string(tok), "not-a-token", first.Continue + "x"} {
			_, err := e.platform.PlatformV1alpha1().NodeCapacities().List(ctx, metav1.ListOptions{Limit: 2, Continue: bad})
			if !apierrors.IsBadRequest(err) {
				t.Errorf("continue %q: got %v, want 400 BadRequest", bad, err)
			}
		}
		// A NodeCapacity token is not valid for a ClusterNamespace list.
		_, err = e.platform.PlatformV1alpha1().ClusterNamespaces("").List(ctx, metav1.ListOptions{Limit: 1, Continue: first.Continue})
		if !apierrors.IsBadRequest(err) {
			t.Errorf("cross-resource token: got %v, want 400 BadRequest", err)
		}
	})

	t.Run("expired token is 410", func(t *testing.T) {
		// A second store on the same registry whose clock runs an hour
		// behind issues a correctly signed token that is already too old.
		old, err := postgres.Open(ctx, e.cp.DatabaseURL(), postgres.Options{Now: func() time.Time { return time.Now().Add(-time.Hour) }})
		if err != nil {
			t.Fatal(err)
		}
		defer old.Close()
		page, err := old.NodeCapacities().List(ctx, store.ListOptions{Limit: 2})
		if err != nil || page.Continue == "" {
			t.Fatalf("list with old clock: %v (continue %q)", err, page.Continue)
		}
		_, err = e.platform.PlatformV1alpha1().NodeCapacities().List(ctx, metav1.ListOptions{Limit: 2, Continue: page.Continue})
		if !apierrors.IsResourceExpired(err) {
			t.Errorf("got %v, want 410 Expired", err)
		}
	})

	t.Run("another registry's token is 410", func(t *testing.T) {
		// Another registry (a database of its own, as after a re-create)
		// signs under another key: its token has expired here, so client-go's
		// pager restarts the list instead of failing.
		other, err := postgres.Open(ctx, pgtest.NewTestDatabase(t), postgres.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer other.Close()
		if err := other.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
		if err := other.Apply(ctx, store.Batch{ClusterID: "elsewhere", Namespaces: []store.Namespace{
			{Name: "a", UID: "a", Phase: "Active"}, {Name: "b", UID: "b", Phase: "Active"}}}); err != nil {
			t.Fatal(err)
		}
		page, err := other.ClusterNamespaces().List(ctx, store.ListOptions{Limit: 1})
		if err != nil || page.Continue == "" {
			t.Fatalf("list of the other registry: %v (continue %q)", err, page.Continue)
		}
		_, err = e.platform.PlatformV1alpha1().ClusterNamespaces("").List(ctx, metav1.ListOptions{Limit: 1, Continue: page.Continue})
		if !apierrors.IsResourceExpired(err) || !strings.Contains(err.Error(), "another registry") {
			t.Errorf("got %v, want 410 Expired saying another registry signed it", err)
		}
	})
}
