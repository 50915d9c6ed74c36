package registry_test

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/example/platform-apiserver/pkg/registry"
	"github.com/example/platform-apiserver/pkg/registry/feed"
	"github.com/example/platform-apiserver/pkg/registry/feed/feedtest"
	"github.com/example/platform-apiserver/pkg/registry/store"
)

// Widget is a throwaway kind declared only here, to prove that a kind is
// one declaration: one object per member node, with its readiness.
type Widget struct {
	metav1.TypeMeta
	metav1.ObjectMeta
	Cluster string
	Ready   bool
}

func (w *Widget) DeepCopyObject() runtime.Object {
	c := *w
	// Explicit: w.DeepCopyInto (the promoted method) would read as copying the whole Widget.
	w.ObjectMeta.DeepCopyInto(&c.ObjectMeta) //nolint:staticcheck // QF1008, see above
	return &c
}

type WidgetList struct {
	metav1.TypeMeta
	metav1.ListMeta
	Items []Widget
}

func (l *WidgetList) DeepCopyObject() runtime.Object {
	c := *l
	c.Items = slices.Clone(l.Items)
	return &c
}

var widgetKind = &registry.Kind[store.NodeCapacity, Widget]{
	Kind: "Widget", Resource: "widgets", Singular: "widget", ShortNames: []string{"wd"},
	Fields: []registry.Field[Widget]{
		{Path: "metadata.name", Value: func(w *Widget) string { return w.Name }, Columns: []string{"cluster_id", "name"}},
		{Path: "status.cluster", Value: func(w *Widget) string { return w.Cluster }, Columns: []string{"cluster_id"}},
		{Path: "status.ready", Value: func(w *Widget) string { return strconv.FormatBool(w.Ready) }, Columns: []string{"ready"}, Bool: true},
	},
	ToObject: func(nc *store.NodeCapacity) Widget {
		return Widget{ObjectMeta: metav1.ObjectMeta{Name: nc.ClusterID + "." + nc.Node.Name, Labels: nc.Node.Labels,
			ResourceVersion: strconv.FormatInt(nc.ResourceVersion, 10)}, Cluster: nc.ClusterID, Ready: nc.Node.Ready}
	},
	NewList: func(items []Widget) runtime.Object { return &WidgetList{Items: items} },
	Key: func(nc *store.NodeCapacity) registry.ChangeKey {
		return registry.ChangeKey{Name: nc.ClusterID + "." + nc.Node.Name, Cluster: nc.ClusterID}
	},
	Columns: []registry.Column[Widget]{
		{Name: "Name", Type: "string", Cell: func(w *Widget) any { return w.Name }},
		{Name: "Ready", Type: "boolean", Cell: func(w *Widget) any { return w.Ready }},
	},
}

type widgets = registry.REST[store.NodeCapacity, Widget, *Widget]

// widgetStack serves widgets over an in-memory feed and a real follower;
// lists record the store options they were asked for.
func widgetStack(t *testing.T) (*feedtest.MemFeed, *widgets, *[]store.ListOptions) {
	t.Helper()
	mem := feedtest.New()
	r, asked := widgetREST(mem, follow(t, mem))
	return mem, r, asked
}

// follow runs a follower of mem until the test ends.
func follow(t *testing.T, mem *feedtest.MemFeed) *feed.Follower {
	t.Helper()
	f := feed.New(mem, feed.Options{PollInterval: 5 * time.Millisecond})
	go f.Run(t.Context())
	if err := f.WaitSynced(t.Context()); err != nil {
		t.Fatal(err)
	}
	return f
}

// widgetREST serves widgets from mem, watched through f.
func widgetREST(mem *feedtest.MemFeed, f *feed.Follower) (*widgets, *[]store.ListOptions) {
	var asked []store.ListOptions
	src := store.Source[store.NodeCapacity]{
		Kind: store.KindNodeCapacity,
		Get: func(ctx context.Context, _, name string) (*store.NodeCapacity, error) {
			cluster, node, _ := strings.Cut(name, ".")
			return mem.GetNodeCapacity(ctx, cluster, node)
		},
		List: func(ctx context.Context, opts store.ListOptions) (*store.Page[store.NodeCapacity], error) {
			asked = append(asked, opts)
			return mem.NodeCapacities().List(ctx, opts)
		},
		Stream: mem.StreamNodeCapacities,
		Key:    mem.NodeCapacities().Key,
	}
	return registry.NewREST[store.NodeCapacity, Widget, *Widget](widgetKind, src, registry.WatchConfig{Follower: f}), &asked
}

func widgetNode(cluster, name string, ready bool) store.NodeCapacity {
	return store.NodeCapacity{ClusterID: cluster, Node: store.Node{Name: name, UID: "uid-" + name, Ready: ready}}
}

func listOptions(t *testing.T, fieldSelector string) *metainternalversion.ListOptions {
	t.Helper()
	sel, err := fields.ParseSelector(fieldSelector)
	if err != nil {
		t.Fatal(err)
	}
	return &metainternalversion.ListOptions{FieldSelector: sel}
}

// TestKindServesThroughTheDescriptor: a kind declared once is served with
// get, list, watch, tables and field selectors, and nothing else.
func TestKindServesThroughTheDescriptor(t *testing.T) {
	mem, r, asked := widgetStack(t)
	mem.Put(widgetNode("c1", "a", true))
	mem.Put(widgetNode("c1", "b", false))
	mem.Put(widgetNode("c2", "a", true))

	obj, err := r.List(t.Context(), listOptions(t, "status.cluster=c1,status.ready=false"))
	if err != nil {
		t.Fatal(err)
	}
	list := obj.(*WidgetList)
	if len(list.Items) != 3 || list.ResourceVersion != "3" {
		t.Errorf("list: %d items at resourceVersion %q, want the in-memory store's 3 at 3", len(list.Items), list.ResourceVersion)
	}
	want := []store.FieldRequirement{
		{Field: store.FieldColumns{Path: "status.cluster", Columns: []string{"cluster_id"}}, Op: "=", Value: "c1"},
		{Field: store.FieldColumns{Path: "status.ready", Columns: []string{"ready"}, Bool: true}, Op: "=", Value: "false"},
	}
	if got := (*asked)[0].Fields; len(got) != 2 || !sameRequirement(got[0], want[0]) || !sameRequirement(got[1], want[1]) {
		t.Errorf("the store was asked for %+v, want %+v", got, want)
	}

	got, err := r.Get(t.Context(), "c2.a", nil)
	if err != nil || got.(*Widget).Cluster != "c2" || !got.(*Widget).Ready {
		t.Errorf("get c2.a: %+v, %v", got, err)
	}
	if _, err := r.Get(t.Context(), "c3.a", nil); !apierrors.IsNotFound(err) || !strings.Contains(err.Error(), "widgets") {
		t.Errorf("get of a missing widget: %v, want 404 naming widgets", err)
	}

	table, err := r.ConvertToTable(t.Context(), list, nil)
	if err != nil || len(table.Rows) != 3 || table.Rows[1].Cells[0] != "c1.b" || table.Rows[1].Cells[1] != false {
		t.Errorf("table: %+v, %v", table, err)
	}

	w, err := r.Watch(t.Context(), &metainternalversion.ListOptions{ResourceVersion: "3", FieldSelector: fields.OneTermEqualSelector("status.ready", "true")})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	mem.Put(widgetNode("c2", "b", false)) // filtered out
	mem.Put(widgetNode("c2", "c", true))
	select {
	case ev := <-w.ResultChan():
		obj := ev.Object
		if co, ok := obj.(runtime.CacheableObject); ok {
			obj = co.GetObject()
		}
		if wd, ok := obj.(*Widget); ev.Type != watch.Added || !ok || wd.Name != "c2.c" {
			t.Errorf("watch event %s %+v, want ADDED c2.c", ev.Type, obj)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no watch event")
	}

	for name, implemented := range map[string]bool{
		"create":           implements[rest.Creater](r),
		"update":           implements[rest.Updater](r),
		"patch":            implements[rest.Patcher](r),
		"delete":           implements[rest.GracefulDeleter](r),
		"deletecollection": implements[rest.CollectionDeleter](r),
		"get, list, watch": !implements[rest.Getter](r) || !implements[rest.Lister](r) || !implements[rest.Watcher](r),
		"short names":      !implements[rest.ShortNamesProvider](r) || !slices.Equal(r.ShortNames(), []string{"wd"}),
		"cluster scope":    r.NamespaceScoped(),
		"singular, tables": !implements[rest.SingularNameProvider](r) || !implements[rest.TableConvertor](r),
	} {
		if implemented {
			t.Errorf("%s: the generic storage is read-only and serves what the kind declares", name)
		}
	}
}

func implements[I any](v any) bool {
	_, ok := v.(I)
	return ok
}

func sameRequirement(a, b store.FieldRequirement) bool {
	return a.Field.Path == b.Field.Path && slices.Equal(a.Field.Columns, b.Field.Columns) && a.Field.Bool == b.Field.Bool &&
		a.Op == b.Op && a.Value == b.Value
}

// TestKindFieldSelectors: a field the kind cannot select gets the same 400
// from the scheme's check and from list and watch, naming the fields it
// can; a value a Bool field cannot hold gets 400 too.
func TestKindFieldSelectors(t *testing.T) {
	_, r, _ := widgetStack(t)
	const supported = "supported field selectors: metadata.name, status.cluster, status.ready"
	_, _, convErr := widgetKind.Declaration().FieldLabelConversion("spec.color", "red")
	if convErr == nil || !strings.Contains(convErr.Error(), `"spec.color" is not supported for Widget; `+supported) {
		t.Errorf("scheme check: %v", convErr)
	}
	if _, _, err := widgetKind.Declaration().FieldLabelConversion("status.ready", "true"); err != nil {
		t.Errorf("scheme check of a declared field: %v", err)
	}
	_, listErr := r.List(t.Context(), listOptions(t, "spec.color=red"))
	_, watchErr := r.Watch(t.Context(), listOptions(t, "spec.color=red"))
	for what, err := range map[string]error{"list": listErr, "watch": watchErr} {
		if !apierrors.IsBadRequest(err) || err.Error() != convErr.Error() {
			t.Errorf("%s of an unsupported field: %v, want 400 %q", what, err, convErr)
		}
	}
	for _, verb := range []string{"list", "watch"} {
		var err error
		if verb == "list" {
			_, err = r.List(t.Context(), listOptions(t, "status.ready=yes"))
		} else {
			_, err = r.Watch(t.Context(), listOptions(t, "status.ready=yes"))
		}
		if !apierrors.IsBadRequest(err) || !strings.Contains(err.Error(), `value "yes" is not "true" or "false"`) {
			t.Errorf("%s with status.ready=yes: %v, want 400", verb, err)
		}
	}
}

// TestKindValidate: declaration mistakes are caught before serving.
func TestKindValidate(t *testing.T) {
	if err := widgetKind.Validate(); err != nil {
		t.Fatal(err)
	}
	bad := *widgetKind
	bad.Namespaced = true
	bad.Fields = append(slices.Clone(widgetKind.Fields),
		registry.Field[Widget]{Path: "status.ready", Value: widgetKind.Fields[2].Value, Columns: []string{"ready"}},
		registry.Field[Widget]{Path: "status.color", Value: widgetKind.Fields[2].Value, Columns: []string{"color; drop table x"}},
		registry.Field[Widget]{Path: "status.size", Columns: []string{"size"}})
	bad.Columns = append(slices.Clone(widgetKind.Columns), registry.Column[Widget]{Name: "Color", Type: "string"})
	err := bad.Validate()
	for _, want := range []string{"field status.ready declared twice", `"color; drop table x" is not a column name`,
		"field status.size needs a Value", `column "Color" needs a Name, a Type and a Cell`, "namespaced kind needs the field metadata.namespace"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("validate: %v, want it to say %q", err, want)
		}
	}
	defer func() {
		if recover() == nil {
			t.Error("NewREST of an invalid kind: want a panic")
		}
	}()
	registry.NewREST[store.NodeCapacity, Widget, *Widget](&bad, store.Source[store.NodeCapacity]{}, registry.WatchConfig{})
}
