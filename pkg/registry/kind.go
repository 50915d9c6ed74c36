package registry

import (
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/util/validation"

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
// from an object (watch filters) and how the registry matches it. A field
// with a Prefix instead of a Path is a family of keyed amounts.
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

	// Prefix, instead of Path, declares one field per key: the path is the
	// prefix (ending in a dot) followed by a key, such as
	// status.available.other.nvidia.com/gpu. Each is a whole number, 0 for
	// a key the object lacks; a selector's value is a quantity ("8",
	// "1Gi"), compared as Quantity.Value rounds it (up).
	Prefix string
	// Key is what may follow Prefix (ResourceName).
	Key Key
	// Get reads a key's amount from the object (watch filters), 0 for a
	// key it lacks.
	Get func(o *O, key string) int64
	// Amount is how the registry computes it from its jsonb columns.
	Amount store.Amount
}

// Key is what follows a keyed field's prefix: its name in messages, an
// example, and its check (messages of what is wrong, none if valid).
type Key struct {
	Name, Example string
	Check         func(string) []string
}

// ResourceName keys fields by Kubernetes resource name (nvidia.com/gpu,
// ephemeral-storage, hugepages-2Mi): a qualified name, as Kubernetes checks
// resource names.
var ResourceName = Key{Name: "resource name", Example: "nvidia.com/gpu", Check: validation.IsQualifiedName}

// DriverName keys fields by DRA driver name (gpu.example.com): a DNS
// subdomain, as resource.k8s.io checks driver names.
var DriverName = Key{Name: "DRA driver name", Example: "gpu.example.com", Check: validation.IsDNS1123Subdomain}

// GroupResource is the kind's resource in platform.example.io.
func (k *Kind[R, O]) GroupResource() schema.GroupResource { return platform.Resource(k.Resource) }

// FieldTable is the kind's selectable fields, as list and watch check them.
func (k *Kind[R, O]) FieldTable() Fields {
	t := Fields{kind: k.Kind, byPath: make(map[string]store.FieldColumns, len(k.Fields))}
	for _, f := range k.Fields {
		if f.Prefix != "" {
			amount := f.Amount
			sf := store.FieldColumns{Path: f.Prefix, Amount: &amount}
			t.byPath[f.Prefix] = sf
			t.keyed = append(t.keyed, keyedField{field: sf, key: f.Key})
			t.paths = append(t.paths, f.Prefix+"<"+f.Key.Name+">")
			continue
		}
		t.byPath[f.Path] = store.FieldColumns{Path: f.Path, Columns: f.Columns, Bool: f.Bool, Values: f.Values}
		t.paths = append(t.paths, f.Path)
	}
	slices.Sort(t.paths)
	return t
}

// FieldValues returns an object's selectable field values, for watch
// filters: a keyed field's value for any key (0 for a key the object
// lacks), in the form a selector's value is normalized to.
func (k *Kind[R, O]) FieldValues(obj *O) fields.Fields {
	set := make(fields.Set, len(k.Fields))
	for _, f := range k.Fields {
		if f.Prefix == "" {
			set[f.Path] = f.Value(obj)
		}
	}
	return objectFields[O]{set: set, fields: k.Fields, obj: obj}
}

// objectFields is an object's field values; keyed ones are read on demand.
type objectFields[O any] struct {
	set    fields.Set
	fields []Field[O]
	obj    *O
}

func (f objectFields[O]) Has(path string) bool {
	_, ok := f.get(path)
	return ok
}

func (f objectFields[O]) Get(path string) string {
	v, _ := f.get(path)
	return v
}

func (f objectFields[O]) get(path string) (string, bool) {
	if v, ok := f.set[path]; ok {
		return v, true
	}
	for _, kf := range f.fields {
		if key, ok := strings.CutPrefix(path, kf.Prefix); ok && kf.Prefix != "" && key != "" {
			return strconv.FormatInt(kf.Get(f.obj, key), 10), true
		}
	}
	return "", false
}

// column is what a table column name may be: it is written into SQL.
var column = regexp.MustCompile(`^[a-z_][a-z0-9_]*$`)

// Validate reports a kind declared incompletely; NewREST panics on it, so
// a mistake fails the first test that serves the kind.
func (k *Kind[R, O]) Validate() error {
	var errs []string
	if k.Kind == "" || k.Resource == "" || k.Singular == "" {
		errs = append(errs, "Kind, Resource and Singular are required")
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
	var prefixes []string
	for _, f := range k.Fields {
		if f.Prefix != "" {
			if slices.Contains(prefixes, f.Prefix) {
				errs = append(errs, fmt.Sprintf("keyed field %s declared twice", f.Prefix))
			}
			prefixes = append(prefixes, f.Prefix)
			errs = append(errs, validateKeyed(f)...)
			continue
		}
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
	// A path must name one field: no prefix may start another or a path.
	for _, p := range prefixes {
		for path := range seen {
			if strings.HasPrefix(path, p) {
				errs = append(errs, fmt.Sprintf("field %s is also a key of the keyed field %s", path, p))
			}
		}
		for _, q := range prefixes {
			if p != q && strings.HasPrefix(q, p) {
				errs = append(errs, fmt.Sprintf("keyed field %s is also a key of the keyed field %s", q, p))
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

// validateKeyed reports what a keyed field's declaration lacks.
func validateKeyed[O any](f Field[O]) []string {
	var errs []string
	if !strings.HasSuffix(f.Prefix, ".") || f.Path != "" || f.Value != nil || len(f.Columns) > 0 {
		errs = append(errs, fmt.Sprintf("keyed field %s: a Prefix ends in a dot and has no Path, Value or Columns", f.Prefix))
	}
	if f.Get == nil || f.Key.Name == "" || f.Key.Check == nil {
		errs = append(errs, fmt.Sprintf("keyed field %s needs a Get and a Key with a Name and a Check", f.Prefix))
	}
	if !column.MatchString(f.Amount.Column) || f.Amount.Minus != "" && !column.MatchString(f.Amount.Minus) {
		errs = append(errs, fmt.Sprintf("keyed field %s: Amount %+v needs a Column (and may have a Minus) that are column names", f.Prefix, f.Amount))
	}
	return errs
}

// Fields is a kind's selectable fields by API path (a keyed field's by its
// prefix).
type Fields struct {
	kind   string
	byPath map[string]store.FieldColumns
	keyed  []keyedField
	paths  []string
}

type keyedField struct {
	field store.FieldColumns
	key   Key
}

// Lookup returns the field at path (a keyed field at its prefix).
func (t Fields) Lookup(path string) (store.FieldColumns, bool) {
	f, ok := t.byPath[path]
	return f, ok
}

// Requirement is the field-selector term "path op value" as the registry
// matches it, or a 400 saying what is wrong: the field at path (a keyed
// one's prefix, Key what follows it), the value checked against what the
// field can hold and a keyed amount's normalized to a whole number.
func (t Fields) Requirement(path string, op selection.Operator, value string) (store.FieldRequirement, error) {
	req := store.FieldRequirement{Op: op, Value: value}
	f, ok := t.byPath[path]
	if ok && f.Amount != nil {
		kf := t.keyedAt(path)
		return req, apierrors.NewBadRequest(fmt.Sprintf("field selector %q needs a %s after the prefix, e.g. %s%s",
			path, kf.key.Name, path, kf.key.Example))
	}
	if !ok {
		for _, kf := range t.keyed {
			key, found := strings.CutPrefix(path, kf.field.Path)
			if !found {
				continue
			}
			if msgs := kf.key.Check(key); len(msgs) > 0 {
				return req, apierrors.NewBadRequest(fmt.Sprintf("field selector %q: %q is not a valid %s (%s), e.g. %s%s",
					path, key, kf.key.Name, strings.Join(msgs, "; "), kf.field.Path, kf.key.Example))
			}
			n, err := amountValue(path, value)
			if err != nil {
				return req, err
			}
			f, ok, req.Key, req.Value = kf.field, true, key, n
			break
		}
	}
	if !ok {
		return req, apierrors.NewBadRequest(t.unsupported(path).Error())
	}
	req.Field = f
	if err := req.ValidateValue(); err != nil {
		return req, apierrors.NewBadRequest(err.Error())
	}
	return req, nil
}

func (t Fields) keyedAt(prefix string) keyedField {
	for _, kf := range t.keyed {
		if kf.field.Path == prefix {
			return kf
		}
	}
	return keyedField{}
}

// amountValue normalizes a keyed amount's selector value, a quantity, to
// the whole number (base 10) it is compared as.
func amountValue(path, value string) (string, error) {
	q, err := resource.ParseQuantity(value)
	if err != nil {
		return "", apierrors.NewBadRequest(fmt.Sprintf("field selector %s: value %q is not a quantity; use a whole number or a quantity such as 8, 500Mi or 1Gi",
			path, value))
	}
	if q.Cmp(*resource.NewQuantity(math.MaxInt64, resource.DecimalSI)) > 0 || q.Cmp(*resource.NewQuantity(math.MinInt64, resource.DecimalSI)) < 0 {
		return "", apierrors.NewBadRequest(fmt.Sprintf("field selector %s: value %q is out of range; amounts are int64s, e.g. 8 or 1Gi", path, value))
	}
	return strconv.FormatInt(q.Value(), 10), nil
}

// convert is the scheme's field label conversion and the watch filter's
// normalization: the value as the registry compares it.
func (t Fields) convert(label, value string) (string, string, error) {
	req, err := t.Requirement(label, selection.Equals, value)
	if err != nil {
		return "", "", err
	}
	return label, req.Value, nil
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
	// (400 for a field the kind cannot select, naming those it can, or a
	// value it cannot hold) and normalizes keyed amounts' values.
	FieldLabelConversion runtime.FieldLabelConversionFunc
}

// Declaration returns the kind's names and field label conversion.
func (k *Kind[R, O]) Declaration() Declaration {
	t := k.FieldTable()
	return Declaration{Kind: k.Kind, Resource: k.Resource, FieldLabelConversion: t.convert}
}

// MustField returns the field at path as the registry matches it; it
// panics if the kind has none (for tests and fixed selectors).
func (k *Kind[R, O]) MustField(path string) store.FieldColumns {
	f, ok := k.FieldTable().Lookup(path)
	if !ok {
		panic(k.FieldTable().unsupported(path))
	}
	return f
}
