package views

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"

	"github.com/example/platform-apiserver/pkg/apis/platform"
	"github.com/example/platform-apiserver/pkg/registry/postgres/pgdb"
	"github.com/example/platform-apiserver/pkg/registry/store"
)

// ClusterLabel is the synthetic label every view object carries (the API
// adds it); selectors on it filter the cluster_id column.
const ClusterLabel = platform.ClusterLabel

// SelectorSQL turns label and field requirements into SQL conditions (to be
// ANDed) over a view table with labels and cluster_id columns; a field
// requirement names its own columns (see store.FieldColumns).
func SelectorSQL(a *pgdb.Args, reqs labels.Requirements, fields []store.FieldRequirement) ([]string, error) {
	var conds []string
	for _, r := range reqs {
		c, err := labelSQL(a, r)
		if err != nil {
			return nil, err
		}
		conds = append(conds, c)
	}
	for _, f := range fields {
		c, err := fieldSQL(a, f)
		if err != nil {
			return nil, err
		}
		conds = append(conds, c)
	}
	return conds, nil
}

// labelSQL translates one label requirement with Kubernetes semantics: != and
// notin match objects without the key; gt and lt match only integer values.
func labelSQL(a *pgdb.Args, r labels.Requirement) (string, error) {
	key, values := r.Key(), r.Values().List()
	if key == ClusterLabel {
		return clusterLabelSQL(a, r.Operator(), values)
	}
	switch r.Operator() {
	case selection.Equals, selection.DoubleEquals, selection.In:
		return containsAny(a, key, values), nil
	case selection.NotEquals, selection.NotIn:
		return notAny(a, key, values), nil
	case selection.Exists:
		return "labels ? " + a.Add(key), nil
	case selection.DoesNotExist:
		return "NOT (labels ? " + a.Add(key) + ")", nil
	case selection.GreaterThan, selection.LessThan:
		return integerCompareSQL(a, "(labels->>"+a.Add(key)+")", r.Operator(), values)
	default:
		return "", fmt.Errorf("label selector operator %q is not supported", r.Operator())
	}
}

// containsAny is a GIN-indexable test that labels hold key with one of
// values: one containment for one value, else a containment of any of an
// array of documents, one bind parameter however many values there are (a
// bitmap scan of the GIN index probes it once per element).
func containsAny(a *pgdb.Args, key string, values []string) string {
	docs := make([]string, len(values))
	for i, v := range values {
		doc, _ := json.Marshal(map[string]string{key: v}) // cannot fail for strings
		docs[i] = string(doc)
	}
	switch len(docs) {
	case 0:
		return "(false)"
	case 1:
		return "(labels @> " + a.Add(docs[0]) + "::jsonb)"
	default:
		return "(labels @> ANY(" + a.Add(docs) + "::jsonb[]))"
	}
}

// notAny is the negation of containsAny, true for objects without key (as
// != and notin are in Kubernetes). No index can serve a negation, so it
// is a filter over the rows the other requirements select: for several
// values a comparison of the key's text with an array of them, cheaper per
// row than as many containments.
func notAny(a *pgdb.Args, key string, values []string) string {
	if len(values) <= 1 {
		return "NOT " + containsAny(a, key, values)
	}
	return "NOT coalesce((labels->>" + a.Add(key) + ") = ANY(" + a.Add(values) + "::text[]), false)"
}

func clusterLabelSQL(a *pgdb.Args, op selection.Operator, values []string) (string, error) {
	switch op {
	case selection.Equals, selection.DoubleEquals, selection.In:
		return "(cluster_id = ANY(" + a.Add(values) + "::text[]))", nil
	case selection.NotEquals, selection.NotIn:
		return "NOT (cluster_id = ANY(" + a.Add(values) + "::text[]))", nil
	case selection.Exists:
		return "(true)", nil
	case selection.DoesNotExist:
		return "(false)", nil
	case selection.GreaterThan, selection.LessThan:
		return integerCompareSQL(a, "cluster_id", op, values)
	default:
		return "", fmt.Errorf("label selector operator %q is not supported", op)
	}
}

// integerCompareSQL compares expr as an int64 the way labels.Requirement
// does: a value that is not a base-10 int64 does not match. The cast sits in
// a CASE branch, so a non-numeric value never reaches it.
func integerCompareSQL(a *pgdb.Args, expr string, op selection.Operator, values []string) (string, error) {
	if len(values) != 1 {
		return "", fmt.Errorf("label selector operator %q needs exactly one value, got %d", op, len(values))
	}
	n, err := strconv.ParseInt(values[0], 10, 64)
	if err != nil {
		return "", fmt.Errorf("label selector operator %q needs an integer value: %w", op, err)
	}
	cmp := ">"
	if op == selection.LessThan {
		cmp = "<"
	}
	return fmt.Sprintf("(CASE WHEN %[1]s ~ '^[+-]?[0-9]{1,19}$' THEN %[1]s::numeric BETWEEN -9223372036854775808 AND 9223372036854775807 AND %[1]s::numeric %[2]s %[3]s::bigint ELSE false END)",
		expr, cmp, a.Add(n)), nil
}

// fieldOp maps a field selector operator to SQL.
func fieldOp(f store.FieldRequirement) (string, error) {
	switch f.Op {
	case selection.Equals, selection.DoubleEquals:
		return "=", nil
	case selection.NotEquals:
		return "<>", nil
	default:
		return "", fmt.Errorf("field selector %s: operator %q is not supported; use =, == or !=", f.Field.Path, f.Op)
	}
}

// fieldSQL matches a field's columns (see store.FieldColumns). Column names come
// from the kinds' declarations, never from a request.
func fieldSQL(a *pgdb.Args, f store.FieldRequirement) (string, error) {
	op, err := fieldOp(f)
	if err != nil {
		return "", err
	}
	if f.Field.Amount != nil {
		return amountSQL(a, f, op)
	}
	var value any = f.Value
	if f.Field.Bool {
		if value, err = strictBool(f.Value); err != nil {
			return "", fmt.Errorf("field selector %s: %w", f.Field.Path, err)
		}
	}
	cols := f.Field.Columns
	switch len(cols) {
	case 1:
		return "(" + cols[0] + " " + op + " " + a.Add(value) + ")", nil
	case 2:
		first, second, ok := strings.Cut(f.Value, ".")
		if !ok { // no object of the kind has a value without a dot
			if op == "=" {
				return "(false)", nil
			}
			return "(true)", nil
		}
		eq := "(" + cols[0] + " = " + a.Add(first) + " AND " + cols[1] + " = " + a.Add(second) + ")"
		if op == "=" {
			return eq, nil
		}
		return "NOT " + eq, nil
	default:
		return "", fmt.Errorf("field selector %s: the field has %d columns, want 1 or 2", f.Field.Path, len(cols))
	}
}

// amountSQL compares a keyed amount (store.Amount) with a whole number, as
// numeric: a key a column's object lacks counts 0. The key and the value
// are bind parameters.
func amountSQL(a *pgdb.Args, f store.FieldRequirement, op string) (string, error) {
	n, err := strconv.ParseInt(f.Value, 10, 64)
	if err != nil || f.Key == "" {
		return "", fmt.Errorf("%w: field selector %s%s: value %q is not a whole number under a key", store.ErrInvalidSelector, f.Field.Path, f.Key, f.Value)
	}
	key := a.Add(f.Key)
	expr := "coalesce((" + f.Field.Amount.Column + "->>" + key + ")::numeric, 0)"
	if m := f.Field.Amount.Minus; m != "" {
		expr += " - coalesce((" + m + "->>" + key + ")::numeric, 0)"
	}
	return "((" + expr + ") " + op + " " + a.Add(n) + "::bigint)", nil
}

func strictBool(s string) (bool, error) {
	switch s {
	case "true":
		return true, nil
	case "false":
		return false, nil
	default:
		return false, fmt.Errorf("value %q is not \"true\" or \"false\"", s)
	}
}
