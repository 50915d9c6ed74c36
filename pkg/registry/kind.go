package registry

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/example/platform-apiserver/pkg/apis/platform"
	"github.com/example/platform-apiserver/pkg/registry/store"
)

// Kind declares one read-only kind the server serves from the registry:
// R is the registry's record, O the internal API object. Everything the
// scheme (field labels), the REST storage (get, list, watch, tables) and
// the registry's selectors need is derived from it, so a kind — or a
// selectable field of it — is declared in one place.
type Kind[R, O any] struct {
	// Kind is the API kind ("NodeCapacity"); Resource the plural resource
	// name, Singular the singular one.
	Kind, Resource, Singular string
	ShortNames, Categories   []string
	// Namespaced kinds are served per namespace; the request namespace
	// selects the field with path "metadata.namespace".
	Namespaced bool
	// StoreKind names the kind in the registry's change feed.
	StoreKind store.Kind
	// Fields are the selectable fields; "metadata.name" should be one.
	Fields []Field[O]
	// ToObject builds the API object of a record.
	ToObject func(*R) O
	// NewList wraps items in the kind's list type (ListMeta is set after).
	NewList func(items []O) runtime.Object
	// Key names a record's object, for routing watch events.
	Key func(*R) ChangeKey
	// Columns print the kind as kubectl tables.
	Columns []Column[O]
}

// Column is one kubectl table column (Priority 1: shown with -o wide) and
// how to fill its cell.
type Column[O any] struct {
	Name, Type, Format, Description string
	Priority                        int32
	Cell                            func(*O) any
}

// Field is a selectable field: its path in the API object, how to read it
// from an object (watch filters) and how the registry matches it.
type Field[O any] struct {
	Path  string
	Value func(*O) string
	// Columns are the registry table's columns the value is matched
	// against: one, or two matched against the value split at its first
	// dot (a NodeCapacity's name is <cluster>.<node>).
	Columns []string
	// Bool fields take only "true" or "false".
	Bool bool
	// Values, when set, are the only values the field can hold; any other
	// is a 400 naming them.
	Values []string
}

// GroupResource is the kind's resource in platform.example.io.
func (k *Kind[R, O]) GroupResource() schema.GroupResource { return platform.Resource(k.Resource) }

// FieldTable is the kind's selectable fields, as list and watch check them.
func (k *Kind[R, O]) FieldTable() Fields {
	t := Fields{kind: k.Kind, byPath: make(map[string]store.Field, len(k.Fields))}
	for _, f := range k.Fields {
		t.byPath[f.Path] = store.Field{Path: f.Path, Columns: f.Columns, Bool: f.Bool, Values: f.Values}
		t.paths = append(t.paths, f.Path)
	}
	slices.Sort(t.paths)
	return t
}

// FieldValues returns an object's selectable field values, for watch
// filters.
func (k *Kind[R, O]) FieldValues(obj *O) fields.Set {
	set := make(fields.Set, len(k.Fields))
	for _, f := range k.Fields {
		set[f.Path] = f.Value(obj)
	}
	return set
}

// column is what a table column name may be: it is written into SQL.
var column = regexp.MustCompile(`^[a-z_][a-z0-9_]*$`)

// Validate reports a kind declared incompletely; NewREST panics on it, so
// a mistake fails the first test that serves the kind.
func (k *Kind[R, O]) Validate() error {
	var errs []string
	if k.Kind == "" || k.Resource == "" || k.Singular == "" || k.StoreKind == "" {
		errs = append(errs, "Kind, Resource, Singular and StoreKind are required")
	}
	if k.ToObject == nil || k.NewList == nil || k.Key == nil || len(k.Columns) == 0 {
		errs = append(errs, "ToObject, NewList, Key and Columns are required")
	}
	for _, c := range k.Columns {
		if c.Name == "" || c.Type == "" || c.Cell == nil {
			errs = append(errs, fmt.Sprintf("column %q needs a Name, a Type and a Cell", c.Name))
		}
	}
	seen := map[string]bool{}
	for _, f := range k.Fields {
		if seen[f.Path] {
			errs = append(errs, fmt.Sprintf("field %s declared twice", f.Path))
		}
		seen[f.Path] = true
		if f.Value == nil || len(f.Columns) < 1 || len(f.Columns) > 2 {
			errs = append(errs, fmt.Sprintf("field %s needs a Value and one or two Columns", f.Path))
		}
		for _, c := range f.Columns {
			if !column.MatchString(c) {
				errs = append(errs, fmt.Sprintf("field %s: %q is not a column name", f.Path, c))
			}
		}
	}
	if k.Namespaced && !seen["metadata.namespace"] {
		errs = append(errs, "a namespaced kind needs the field metadata.namespace")
	}
	if len(errs) > 0 {
		return fmt.Errorf("kind %s: %s", k.Kind, strings.Join(errs, "; "))
	}
	return nil
}

// Fields is a kind's selectable fields by API path.
type Fields struct {
	kind   string
	byPath map[string]store.Field
	paths  []string
}

// Lookup returns the field at path.
func (t Fields) Lookup(path string) (store.Field, bool) {
	f, ok := t.byPath[path]
	return f, ok
}

// unsupported is the one error for a field selector a kind cannot select.
func (t Fields) unsupported(path string) error {
	return fmt.Errorf("field selector %q is not supported for %s; supported field selectors: %s",
		path, t.kind, strings.Join(t.paths, ", "))
}

// table is the kind's kubectl table convertor.
func (k *Kind[R, O]) table(cell func(runtime.Object) (*O, error)) TableConvertor {
	defs := make([]metav1.TableColumnDefinition, len(k.Columns))
	for i, c := range k.Columns {
		defs[i] = metav1.TableColumnDefinition{Name: c.Name, Type: c.Type, Format: c.Format, Description: c.Description, Priority: c.Priority}
	}
	return TableConvertor{Columns: defs, Cells: func(obj runtime.Object) ([]any, error) {
		o, err := cell(obj)
		if err != nil {
			return nil, err
		}
		cells := make([]any, len(k.Columns))
		for i, c := range k.Columns {
			cells[i] = c.Cell(o)
		}
		return cells, nil
	}}
}

// Declaration is what the server's assembly reads of any kind.
type Declaration struct {
	Kind, Resource string
	// FieldLabelConversion answers the scheme's check of field selectors
	// (400 for a field the kind cannot select, naming those it can).
	FieldLabelConversion runtime.FieldLabelConversionFunc
}

// Declaration returns the kind's names and field label conversion.
func (k *Kind[R, O]) Declaration() Declaration {
	t := k.FieldTable()
	return Declaration{Kind: k.Kind, Resource: k.Resource, FieldLabelConversion: func(label, value string) (string, string, error) {
		if _, ok := t.byPath[label]; !ok {
			return "", "", t.unsupported(label)
		}
		return label, value, nil
	}}
}

// MustField returns the field at path as the registry matches it; it
// panics if the kind has none (for tests and fixed selectors).
func (k *Kind[R, O]) MustField(path string) store.Field {
	f, ok := k.FieldTable().Lookup(path)
	if !ok {
		panic(k.FieldTable().unsupported(path))
	}
	return f
}
