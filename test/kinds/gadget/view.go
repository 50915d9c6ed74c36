package gadget

import (
	"context"
	"strings"
	"time"

	"github.com/example/platform-apiserver/pkg/registry/postgres/views"
	"github.com/example/platform-apiserver/pkg/registry/postgres/writes"
	"github.com/example/platform-apiserver/pkg/registry/store"
)

// Record is a gadget as the registry holds it: a row of test_gadget
// (migrations/).
type Record struct {
	ClusterID, Name string
	Labels          map[string]string
	Color           string
	FirstSeen       time.Time
	ResourceVersion int64
}

// View is the registry's view of gadgets: its table, keys and columns.
var View = views.Declare(views.View[Record]{
	Kind: "Gadget", Resource: "gadgets", Table: "test_gadget",
	Order: [2]string{"cluster_id", "name"},
	Key:   func(g *Record) store.ListKey { return store.ListKey{g.ClusterID, g.Name} },
	Name: func(_, name string) (store.ListKey, bool) {
		cluster, gadget, ok := splitName(name)
		return store.ListKey{cluster, gadget}, ok
	},
	Columns: []views.Column[Record]{
		views.Col("cluster_id", func(g *Record) *string { return &g.ClusterID }),
		views.Field("name", "text", func(g *Record) *string { return &g.Name }),
		views.JSONField("labels", func(g *Record) *map[string]string { return &g.Labels }, "{}"),
		views.Field("color", "text", func(g *Record) *string { return &g.Color }),
		views.Col("first_seen", func(g *Record) *time.Time { return &g.FirstSeen }),
		views.Col("resource_version", func(g *Record) *int64 { return &g.ResourceVersion }),
	},
})

// Put writes gadgets of cluster through the view's upsert, as discovery's
// batches write every view: under a commit ticket, one version per
// changed row, none for an unchanged one.
func Put(ctx context.Context, e *writes.Engine, cluster string, gs ...Record) error {
	rows, err := View.BatchRows(gs)
	if err != nil {
		return err
	}
	return e.Write(ctx, "test_gadgets", writes.Sections{Views: func(w *writes.Writer) error {
		return w.Stamp("upsert gadgets", View.UpsertSQL(), cluster, rows)
	}})
}

// splitName splits an object name at its first dot: <cluster id>.<name>.
func splitName(name string) (cluster, gadget string, ok bool) {
	cluster, gadget, ok = strings.Cut(name, ".")
	return cluster, gadget, ok && cluster != "" && gadget != ""
}
