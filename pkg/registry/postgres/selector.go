package postgres

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"

	"github.com/example/platform-apiserver/pkg/apis/platform"
	"github.com/example/platform-apiserver/pkg/registry/store"
)

// ClusterLabel is the synthetic label every view object carries (the API
// adds it); selectors on it filter the cluster_id column.
const ClusterLabel = platform.ClusterLabel

// sqlArgs collects bind parameters and hands out their placeholders.
type sqlArgs []any

func (a *sqlArgs) add(v any) string {
	*a = append(*a, v)
	return "$" + strconv.Itoa(len(*a))
}

// kind describes how one view table answers selectors.
type kind struct {
	name   string // resource name, used in tokens and errors
	fields func(a *sqlArgs, f store.FieldRequirement) (string, error)
}

var (
	nodeCapacityKind     = kind{name: "nodecapacities", fields: nodeCapacityFieldSQL}
	clusterNamespaceKind = kind{name: "clusternamespaces", fields: clusterNamespaceFieldSQL}
)

// selectorSQL turns label and field requirements into SQL conditions (to be
// ANDed) over a view table with labels and cluster_id columns.
func selectorSQL(a *sqlArgs, k kind, reqs labels.Requirements, fields []store.FieldRequirement) ([]string, error) {
	var conds []string
	for _, r := range reqs {
		c, err := labelSQL(a, r)
		if err != nil {
			return nil, err
		}
		conds = append(conds, c)
	}
	for _, f := range fields {
		c, err := k.fields(a, f)
		if err != nil {
			return nil, err
		}
		conds = append(conds, c)
	}
	return conds, nil
}

// labelSQL translates one label requirement with Kubernetes semantics: != and
// notin match objects without the key; gt and lt match only integer values.
func labelSQL(a *sqlArgs, r labels.Requirement) (string, error) {
	key, values := r.Key(), r.Values().List()
	if key == ClusterLabel {
		return clusterLabelSQL(a, r.Operator(), values)
	}
	switch r.Operator() {
	case selection.Equals, selection.DoubleEquals, selection.In:
		return containsAny(a, key, values), nil
	case selection.NotEquals, selection.NotIn:
		return "NOT " + containsAny(a, key, values), nil
	case selection.Exists:
		return "labels ? " + a.add(key), nil
	case selection.DoesNotExist:
		return "NOT (labels ? " + a.add(key) + ")", nil
	case selection.GreaterThan, selection.LessThan:
		return integerCompareSQL(a, "(labels->>"+a.add(key)+")", r.Operator(), values)
	default:
		return "", fmt.Errorf("label selector operator %q is not supported", r.Operator())
	}
}

// containsAny is a GIN-indexable test that labels hold key with one of values.
func containsAny(a *sqlArgs, key string, values []string) string {
	if len(values) == 0 {
		return "(false)"
	}
	terms := make([]string, len(values))
	for i, v := range values {
		doc, _ := json.Marshal(map[string]string{key: v}) // cannot fail for strings
		terms[i] = "labels @> " + a.add(string(doc)) + "::jsonb"
	}
	return "(" + strings.Join(terms, " OR ") + ")"
}

func clusterLabelSQL(a *sqlArgs, op selection.Operator, values []string) (string, error) {
	switch op {
	case selection.Equals, selection.DoubleEquals, selection.In:
		return "(cluster_id = ANY(" + a.add(values) + "::text[]))", nil
	case selection.NotEquals, selection.NotIn:
		return "NOT (cluster_id = ANY(" + a.add(values) + "::text[]))", nil
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
func integerCompareSQL(a *sqlArgs, expr string, op selection.Operator, values []string) (string, error) {
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
		expr, cmp, a.add(n)), nil
}

// fieldOp maps a field selector operator to SQL.
func fieldOp(f store.FieldRequirement) (string, error) {
	switch f.Op {
	case selection.Equals, selection.DoubleEquals:
		return "=", nil
	case selection.NotEquals:
		return "<>", nil
	default:
		return "", fmt.Errorf("field selector %s: operator %q is not supported; use =, == or !=", f.Field, f.Op)
	}
}

func nodeCapacityFieldSQL(a *sqlArgs, f store.FieldRequirement) (string, error) {
	op, err := fieldOp(f)
	if err != nil {
		return "", err
	}
	switch f.Field {
	case store.FieldName:
		cluster, node, ok := strings.Cut(f.Value, ".")
		if !ok { // no NodeCapacity has a name without a dot
			if op == "=" {
				return "(false)", nil
			}
			return "(true)", nil
		}
		eq := "(cluster_id = " + a.add(cluster) + " AND name = " + a.add(node) + ")"
		if op == "=" {
			return eq, nil
		}
		return "NOT " + eq, nil
	case store.FieldCluster:
		return "(cluster_id " + op + " " + a.add(f.Value) + ")", nil
	case store.FieldNodeName:
		return "(name " + op + " " + a.add(f.Value) + ")", nil
	case store.FieldSchedulable:
		v, err := strictBool(f.Value)
		if err != nil {
			return "", fmt.Errorf("field selector %s: %w", f.Field, err)
		}
		return "(schedulable " + op + " " + a.add(v) + ")", nil
	default:
		return "", unsupportedField("nodecapacities", f.Field, store.FieldName, store.FieldCluster, store.FieldNodeName, store.FieldSchedulable)
	}
}

func clusterNamespaceFieldSQL(a *sqlArgs, f store.FieldRequirement) (string, error) {
	op, err := fieldOp(f)
	if err != nil {
		return "", err
	}
	var col string
	switch f.Field {
	case store.FieldName, store.FieldCluster:
		col = "cluster_id"
	case store.FieldNamespace:
		col = "name"
	case store.FieldPhase:
		col = "phase"
	default:
		return "", unsupportedField("clusternamespaces", f.Field, store.FieldName, store.FieldNamespace, store.FieldCluster, store.FieldPhase)
	}
	return "(" + col + " " + op + " " + a.add(f.Value) + ")", nil
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

func unsupportedField(kind string, f store.Field, supported ...store.Field) error {
	names := make([]string, len(supported))
	for i, s := range supported {
		names[i] = string(s)
	}
	return fmt.Errorf("field %q is not supported for %s; supported: %s", f, kind, strings.Join(names, ", "))
}
