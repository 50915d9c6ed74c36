package gadget

import (
	"embed"
	"io/fs"
	"strconv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/example/platform-apiserver/pkg/registry"
)

// Kind declares Gadget: names, selectable fields, conversion and table.
var Kind = &registry.Kind[Record, Gadget]{
	Kind: "Gadget", Resource: "gadgets", Singular: "gadget", ShortNames: []string{"gdg"},
	Fields: []registry.Field[Gadget]{
		{Path: "metadata.name", Value: func(g *Gadget) string { return g.Name }, Columns: []string{"cluster_id", "name"}},
		{Path: "status.cluster", Value: func(g *Gadget) string { return g.Status.Cluster }, Columns: []string{"cluster_id"}},
		{Path: "status.color", Value: func(g *Gadget) string { return g.Status.Color }, Columns: []string{"color"}},
	},
	ToObject: func(g *Record) Gadget {
		return Gadget{
			ObjectMeta: metav1.ObjectMeta{Name: g.ClusterID + "." + g.Name, Labels: g.Labels,
				CreationTimestamp: metav1.NewTime(g.FirstSeen), ResourceVersion: strconv.FormatInt(g.ResourceVersion, 10)},
			Status: GadgetStatus{Cluster: g.ClusterID, Color: g.Color},
		}
	},
	NewList: func(items []Gadget) runtime.Object { return &GadgetList{Items: items} },
	Key: func(g *Record) registry.ChangeKey {
		return registry.ChangeKey{Name: g.ClusterID + "." + g.Name, Cluster: g.ClusterID}
	},
	Columns: []registry.Column[Gadget]{
		{Name: "Name", Type: "string", Cell: func(g *Gadget) any { return g.Name }},
		{Name: "Cluster", Type: "string", Cell: func(g *Gadget) any { return g.Status.Cluster }},
		{Name: "Color", Type: "string", Cell: func(g *Gadget) any { return g.Status.Color }},
	},
}

//go:embed migrations/*.sql
var migrationFiles embed.FS

// Migrations make the gadgets' table (test_gadget) a view table.
var Migrations, _ = fs.Sub(migrationFiles, "migrations")
