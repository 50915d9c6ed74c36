package integration

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"

	"github.com/example/platform-apiserver/pkg/registry/postgres/pgdb"
	pgschema "github.com/example/platform-apiserver/pkg/registry/postgres/schema"
	"github.com/example/platform-apiserver/pkg/registry/postgres/writes"
	"github.com/example/platform-apiserver/test/framework"
	"github.com/example/platform-apiserver/test/kinds/gadget"
)

// TestAKindOfFourFiles: a kind declared outside the server's API types in
// four files and a migration (test/kinds/gadget: its API types, its
// registry view, its declaration, and a main serving it with
// apiserver.Extend) is served through kube-apiserver's aggregator as the
// built-in kinds are: discovery, kubectl tables, get, label and field
// selectors (a bad one refused naming those it can), OpenAPI (kubectl
// explain) and a watch, from its rows written through the registry's
// write engine; the built-in kinds beside it.
func TestAKindOfFourFiles(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	binary := filepath.Join(t.TempDir(), "platform-apiserver-gadget")
	if err := framework.BuildCommand(ctx, "./test/kinds/gadget/apiserver", binary); err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, framework.Options{PlatformAPIServerBinary: binary})
	engine := writeEngine(t, e.cp.DatabaseURL())
	put := func(cluster string, gs ...gadget.Record) {
		t.Helper()
		if err := gadget.Put(ctx, engine, cluster, gs...); err != nil {
			t.Fatalf("write gadgets of %s: %v", cluster, err)
		}
	}
	put("c1", gadget.Record{Name: "a", Color: "red", Labels: map[string]string{"size": "s"}},
		gadget.Record{Name: "b", Color: "blue", Labels: map[string]string{"size": "l"}})
	put("c2", gadget.Record{Name: "a", Color: "red"})

	out := e.kubectl(t, "api-resources", "--api-group=platform.example.io", "--no-headers")
	if !strings.Contains(out, "gadgets") || !strings.Contains(out, "gdg") || !strings.Contains(out, "nodecapacities") {
		t.Errorf("kubectl api-resources lacks gadgets (short name gdg) beside nodecapacities:\n%s", out)
	}
	out = e.kubectl(t, "get", "gadgets")
	if got := rowCount(out); got != 3 || cell(t, out, "c1.b", "COLOR") != "blue" || cell(t, out, "c2.a", "CLUSTER") != "c2" {
		t.Errorf("kubectl get gadgets, want c1.a, c1.b and c2.a with their clusters and colors:\n%s", out)
	}
	out = e.kubectl(t, "get", "gdg", "-l", "size=s", "--field-selector", "status.color=red", "-o", "name")
	if strings.TrimSpace(out) != "gadget.platform.example.io/c1.a" {
		t.Errorf("small red gadgets: %q, want c1.a only", out)
	}
	var g gadget.Gadget
	if err := json.Unmarshal([]byte(e.kubectl(t, "get", "gadget", "c1.b", "-o", "json")), &g); err != nil {
		t.Fatal(err)
	}
	if g.Kind != "Gadget" || g.APIVersion != "platform.example.io/v1alpha1" || g.Status != (gadget.GadgetStatus{Cluster: "c1", Color: "blue"}) ||
		g.Labels["size"] != "l" || g.ResourceVersion == "" || g.CreationTimestamp.IsZero() {
		t.Errorf("kubectl get gadget c1.b -o json: %+v", g)
	}
	stderr := e.kubectlFails(ctx, t, e.cp.AdminKubeconfig(), "get", "gadgets", "--field-selector", "status.size=s")
	if !strings.Contains(stderr, "status.size") || !strings.Contains(stderr, "status.color") {
		t.Errorf("an unknown field selector: %s, want a refusal naming it and the fields gadgets select", stderr)
	}
	// kube-apiserver merges the server's OpenAPI documents once it reaches
	// them, retrying with a backoff from the APIService's start.
	eventually(t, "kubectl explain gadget.status.color", time.Minute, func(ctx context.Context) (bool, string) {
		out, stderr, err := e.cp.Kubectl(ctx, "explain", "gadget.status.color")
		return err == nil && strings.Contains(out, "Color is the gadget's color"), out + stderr
	})
	if out := e.kubectl(t, "get", "nodecapacities", "-o", "name"); out != "" {
		t.Errorf("kubectl get nodecapacities beside gadgets: %q, want none", out)
	}

	// A watch from a list's version sees the update that turns c1.b green
	// and nothing of an unchanged write.
	gadgets := dynamic.NewForConfigOrDie(e.cp.AdminConfig()).Resource(schema.GroupVersionResource{
		Group: "platform.example.io", Version: "v1alpha1", Resource: "gadgets"})
	list, err := gadgets.List(ctx, metav1.ListOptions{})
	if err != nil || len(list.Items) != 3 {
		t.Fatalf("list gadgets with the dynamic client: %v, %v", list, err)
	}
	w, err := gadgets.Watch(ctx, metav1.ListOptions{ResourceVersion: list.GetResourceVersion()})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	put("c2", gadget.Record{Name: "a", Color: "red"})
	put("c1", gadget.Record{Name: "b", Color: "green", Labels: map[string]string{"size": "l"}})
	select {
	case ev := <-w.ResultChan():
		if u, ok := ev.Object.(interface{ GetName() string }); ev.Type != watch.Modified || !ok || u.GetName() != "c1.b" {
			t.Errorf("first watch event: %s %+v, want c1.b MODIFIED", ev.Type, ev.Object)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no watch event for c1.b turning green within 30s")
	}
	if out := e.kubectl(t, "get", "gadget", "c1.b", "-o", "jsonpath={.status.color}"); out != "green" {
		t.Errorf("c1.b is %q after the update, want green", out)
	}
}

// writeEngine is the registry's write engine on the database at dsn, for
// writing rows of a view as discovery does.
func writeEngine(t *testing.T, dsn string) *writes.Engine {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	pgschema.SetWriteProtocol(cfg)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	pool, err := pgdb.NewPool(ctx, "test-writes", cfg, 2, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return writes.New(pool)
}
