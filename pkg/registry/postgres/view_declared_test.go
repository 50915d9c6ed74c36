package postgres

import (
	"slices"
	"strconv"
	"testing"
	"time"

	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/example/platform-apiserver/pkg/registry"
	"github.com/example/platform-apiserver/pkg/registry/feed"
	"github.com/example/platform-apiserver/pkg/registry/postgres/changelog"
	"github.com/example/platform-apiserver/pkg/registry/postgres/views"
	"github.com/example/platform-apiserver/pkg/registry/postgres/writes"
	"github.com/example/platform-apiserver/pkg/registry/store"
	pgtest "github.com/example/platform-apiserver/test/framework/postgres"
)

// A throwaway kind declared only in this file, to prove that a registry
// view is one declaration: the record, its view (below) and its table
// (gadgetMigration) are all a kind needs to be served from PostgreSQL —
// get, list with label and field selectors, watch and tables — through the
// API layer's own declaration (registry.Kind).
type gadget struct {
	ClusterID, Name string
	Labels          map[string]string
	Color           string
	FirstSeen       time.Time
	ResourceVersion int64
}

var gadgetView = views.Declare(views.View[gadget]{
	Kind: "Gadget", Resource: "gadgets", Table: "test_gadget",
	Order: [2]string{"cluster_id", "name"},
	Key:   func(g *gadget) store.ListKey { return store.ListKey{g.ClusterID, g.Name} },
	Name: func(_, name string) (store.ListKey, bool) {
		k, ok := gadgetKey(name)
		return k, ok
	},
	Columns: []views.Column[gadget]{
		views.Col("cluster_id", func(g *gadget) *string { return &g.ClusterID }),
		views.Field("name", "text", func(g *gadget) *string { return &g.Name }),
		views.JSONField("labels", func(g *gadget) *map[string]string { return &g.Labels }, "{}"),
		views.Field("color", "text", func(g *gadget) *string { return &g.Color }),
		views.Col("first_seen", func(g *gadget) *time.Time { return &g.FirstSeen }),
		views.Col("resource_version", func(g *gadget) *int64 { return &g.ResourceVersion }),
	},
})

// gadgetMigration is the kind's one migration: its table, and the call
// that makes it a view table in the change log (its three log triggers and
// the kind in the log's list of kinds).
const gadgetMigration = `
CREATE TABLE test_gadget (
	cluster_id text NOT NULL, name text NOT NULL, labels jsonb NOT NULL, color text NOT NULL,
	first_seen timestamptz NOT NULL DEFAULT now(), resource_version bigint NOT NULL,
	PRIMARY KEY (cluster_id, name));
SELECT registry_define_view('test_gadget', 'Gadget');`

func gadgetKey(name string) (store.ListKey, bool) {
	for i := range len(name) {
		if name[i] == '.' {
			return store.ListKey{name[:i], name[i+1:]}, i > 0 && i < len(name)-1
		}
	}
	return store.ListKey{}, false
}

// Gadget is the kind's API object.
type Gadget struct {
	metav1.TypeMeta
	metav1.ObjectMeta
	Color string
}

func (g *Gadget) DeepCopyObject() runtime.Object {
	c := *g
	g.ObjectMeta.DeepCopyInto(&c.ObjectMeta) //nolint:staticcheck // QF1008: copies the metadata only
	return &c
}

type GadgetList struct {
	metav1.TypeMeta
	metav1.ListMeta
	Items []Gadget
}

func (l *GadgetList) DeepCopyObject() runtime.Object {
	c := *l
	c.Items = slices.Clone(l.Items)
	return &c
}

var gadgetKind = &registry.Kind[gadget, Gadget]{
	Kind: "Gadget", Resource: "gadgets", Singular: "gadget",
	Fields: []registry.Field[Gadget]{
		{Path: "metadata.name", Value: func(g *Gadget) string { return g.Name }, Columns: []string{"cluster_id", "name"}},
		{Path: "status.color", Value: func(g *Gadget) string { return g.Color }, Columns: []string{"color"}},
	},
	ToObject: func(g *gadget) Gadget {
		return Gadget{ObjectMeta: metav1.ObjectMeta{Name: g.ClusterID + "." + g.Name, Labels: g.Labels,
			ResourceVersion: strconv.FormatInt(g.ResourceVersion, 10)}, Color: g.Color}
	},
	NewList: func(items []Gadget) runtime.Object { return &GadgetList{Items: items} },
	Key: func(g *gadget) registry.ChangeKey {
		return registry.ChangeKey{Name: g.ClusterID + "." + g.Name, Cluster: g.ClusterID}
	},
	Columns: []registry.Column[Gadget]{
		{Name: "Name", Type: "string", Cell: func(g *Gadget) any { return g.Name }},
		{Name: "Color", Type: "string", Cell: func(g *Gadget) any { return g.Color }},
	},
}

// putGadgets writes gadgets of cluster through the view's upsert, the way
// discovery's batches write every view, and returns the version reached.
func putGadgets(t *testing.T, s *Store, cluster string, gs ...gadget) {
	t.Helper()
	rows, err := gadgetView.BatchRows(gs)
	if err != nil {
		t.Fatal(err)
	}
	err = s.engine.Write(t.Context(), "test_gadgets", writes.Sections{Views: func(w *writes.Writer) error {
		return w.Stamp("upsert gadgets", gadgetView.UpsertSQL(), cluster, rows)
	}})
	if err != nil {
		t.Fatalf("write gadgets: %v", err)
	}
}

// TestViewDeclaredOnce: the throwaway Gadget kind is served end to end
// from PostgreSQL through its record, its view, its registry.Kind and one
// migration (a table and a call of registry_define_view).
func TestViewDeclaredOnce(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := openStore(t, pgtest.NewTestDatabase(t), Options{})
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.writes.Exec(ctx, gadgetMigration); err != nil {
		t.Fatal(err)
	}
	s.changeLog = changelog.New(append(views.InChangeLog(), gadgetView.Logged())...)
	f := feed.New(s, feed.Options{PollInterval: 20 * time.Millisecond})
	go f.Run(ctx)
	if err := f.WaitSynced(ctx); err != nil {
		t.Fatal(err)
	}
	r := registry.NewREST[gadget, Gadget, *Gadget](gadgetKind, Source(s, gadgetView), registry.WatchConfig{Follower: f})

	putGadgets(t, s, "c1",
		gadget{Name: "a", Color: "red", Labels: map[string]string{"size": "s"}},
		gadget{Name: "b", Color: "blue", Labels: map[string]string{"size": "l"}})
	putGadgets(t, s, "c2", gadget{Name: "a", Color: "red"})

	// A list with a field and a label selector, answered by SQL.
	obj, err := r.List(ctx, &metainternalversion.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("status.color", "red"),
		LabelSelector: labels.SelectorFromSet(labels.Set{"size": "s"}),
	})
	if err != nil {
		t.Fatal(err)
	}
	if items := obj.(*GadgetList).Items; len(items) != 1 || items[0].Name != "c1.a" || items[0].Color != "red" {
		t.Errorf("red small gadgets: %+v, want c1.a", items)
	}
	all, err := r.List(ctx, &metainternalversion.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	list := all.(*GadgetList)
	if len(list.Items) != 3 || list.Items[2].Name != "c2.a" {
		t.Errorf("all gadgets: %+v, want c1.a, c1.b, c2.a", list.Items)
	}

	got, err := r.Get(ctx, "c1.b", nil)
	if err != nil || got.(*Gadget).Color != "blue" || got.(*Gadget).Labels["size"] != "l" {
		t.Errorf("get c1.b: %+v, %v", got, err)
	}
	if _, err := r.Get(ctx, "c1", nil); err == nil {
		t.Error("get of a name without a cluster succeeded")
	}

	table, err := r.ConvertToTable(ctx, list, nil)
	if err != nil || len(table.Rows) != 3 || table.Rows[1].Cells[1] != "blue" {
		t.Errorf("table: %+v, %v", table, err)
	}

	// A watch from the list's version sees an update (the view's upsert
	// compares the input columns) and not an unchanged write.
	w, err := r.Watch(ctx, &metainternalversion.ListOptions{ResourceVersion: list.ResourceVersion,
		FieldSelector: fields.OneTermEqualSelector("status.color", "green")})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	putGadgets(t, s, "c2", gadget{Name: "a", Color: "red"}) // unchanged: no new version
	putGadgets(t, s, "c1", gadget{Name: "b", Color: "green", Labels: map[string]string{"size": "l"}})
	select {
	case ev := <-w.ResultChan():
		obj := ev.Object
		if co, ok := obj.(runtime.CacheableObject); ok {
			obj = co.GetObject()
		}
		if g, ok := obj.(*Gadget); ev.Type != watch.Added || !ok || g.Name != "c1.b" || g.Color != "green" {
			t.Errorf("watch event %s %+v, want c1.b turning green (ADDED to the selection)", ev.Type, obj)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no watch event for the update")
	}
	changes, _, err := s.Changes(ctx, store.ChangeFilter{Kind: "Gadget"}, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(changes) != 4 {
		t.Errorf("the change feed holds %d Gadget changes, want 4 (three added, one modified; the unchanged write none)", len(changes))
	}
	for _, c := range changes {
		if g, _ := store.Records[gadget](&c); g == nil || c.ClusterID != g.ClusterID || c.Size <= 0 {
			t.Errorf("change %d: record %+v, cluster %q, size %d", c.ResourceVersion, g, c.ClusterID, c.Size)
		}
	}
}
