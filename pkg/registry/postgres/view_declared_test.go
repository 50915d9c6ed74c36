package postgres

import (
	"strings"
	"testing"
	"time"

	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/example/platform-apiserver/pkg/registry"
	"github.com/example/platform-apiserver/pkg/registry/feed"
	"github.com/example/platform-apiserver/pkg/registry/postgres/views"
	"github.com/example/platform-apiserver/pkg/registry/store"
	pgtest "github.com/example/platform-apiserver/test/framework/postgres"
	"github.com/example/platform-apiserver/test/kinds/gadget"
)

// TestViewDeclaredOnce: the throwaway Gadget kind (test/kinds/gadget) is
// served end to end from PostgreSQL through its record, its view, its
// registry.Kind and one migration (a table and a call of
// registry_define_view), given to the store as an Extension.
func TestViewDeclaredOnce(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := openStore(t, pgtest.NewTestDatabase(t), Options{Extension: Extension{
		Views: []views.Logged{gadget.View.Logged()}, Migrations: gadget.Migrations}})
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if pending, err := s.PendingMigrations(ctx); err != nil || len(pending) != 0 {
		t.Fatalf("pending migrations after Migrate: %v, %v", pending, err)
	}
	f := feed.New(s, feed.Options{PollInterval: 20 * time.Millisecond})
	go f.Run(ctx)
	if err := f.WaitSynced(ctx); err != nil {
		t.Fatal(err)
	}
	r := registry.NewREST[gadget.Record, gadget.Gadget, *gadget.Gadget](gadget.Kind, Source(s, gadget.View), registry.WatchConfig{Follower: f})
	put := func(cluster string, gs ...gadget.Record) {
		t.Helper()
		if err := gadget.Put(ctx, s.engine, cluster, gs...); err != nil {
			t.Fatalf("write gadgets: %v", err)
		}
	}

	put("c1",
		gadget.Record{Name: "a", Color: "red", Labels: map[string]string{"size": "s"}},
		gadget.Record{Name: "b", Color: "blue", Labels: map[string]string{"size": "l"}})
	put("c2", gadget.Record{Name: "a", Color: "red"})

	// A list with a field and a label selector, answered by SQL.
	obj, err := r.List(ctx, &metainternalversion.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("status.color", "red"),
		LabelSelector: labels.SelectorFromSet(labels.Set{"size": "s"}),
	})
	if err != nil {
		t.Fatal(err)
	}
	if items := obj.(*gadget.GadgetList).Items; len(items) != 1 || items[0].Name != "c1.a" || items[0].Status.Color != "red" {
		t.Errorf("red small gadgets: %+v, want c1.a", items)
	}
	all, err := r.List(ctx, &metainternalversion.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	list := all.(*gadget.GadgetList)
	if len(list.Items) != 3 || list.Items[2].Name != "c2.a" {
		t.Errorf("all gadgets: %+v, want c1.a, c1.b, c2.a", list.Items)
	}

	got, err := r.Get(ctx, "c1.b", nil)
	if err != nil || got.(*gadget.Gadget).Status.Color != "blue" || got.(*gadget.Gadget).Labels["size"] != "l" {
		t.Errorf("get c1.b: %+v, %v", got, err)
	}
	if _, err := r.Get(ctx, "c1", nil); err == nil {
		t.Error("get of a name without a cluster succeeded")
	}

	table, err := r.ConvertToTable(ctx, list, nil)
	if err != nil || len(table.Rows) != 3 || table.Rows[1].Cells[2] != "blue" {
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
	put("c2", gadget.Record{Name: "a", Color: "red"}) // unchanged: no new version
	put("c1", gadget.Record{Name: "b", Color: "green", Labels: map[string]string{"size": "l"}})
	select {
	case ev := <-w.ResultChan():
		obj := ev.Object
		if co, ok := obj.(runtime.CacheableObject); ok {
			obj = co.GetObject()
		}
		if g, ok := obj.(*gadget.Gadget); ev.Type != watch.Added || !ok || g.Name != "c1.b" || g.Status.Color != "green" {
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
		if g, _ := store.Records[gadget.Record](&c); g == nil || c.ClusterID != g.ClusterID || c.Size <= 0 {
			t.Errorf("change %d: record %+v, cluster %q, size %d", c.ResourceVersion, g, c.ClusterID, c.Size)
		}
	}
	// The kind's down migration is the newest: it goes first, and leaves
	// the change log's list of kinds as it was.
	if err := s.MigrateDown(ctx, 1); err != nil {
		t.Fatal(err)
	}
	var gadgets *string
	var kinds string
	err = s.writes.QueryRow(ctx, `SELECT to_regclass('test_gadget')::text, pg_get_constraintdef(oid) FROM pg_constraint
		WHERE conrelid = 'registry_change'::regclass AND conname = 'registry_change_kind_check'`).Scan(&gadgets, &kinds)
	if err != nil || gadgets != nil || strings.Contains(kinds, "Gadget") || !strings.Contains(kinds, "ClusterCapacity") {
		t.Errorf("after the gadget's down migration: table %v, kinds %s, %v; want no test_gadget and the registry's kinds", gadgets, kinds, err)
	}
}
