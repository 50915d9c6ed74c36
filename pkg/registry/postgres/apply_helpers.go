package postgres

import (
	"encoding/json"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/example/platform-apiserver/pkg/registry/store"
)

// collectNamespaces adds the namespaces in rows (one text column) to a.namespaces.
func (a *applier) collectNamespaces(rows pgx.Rows) error {
	defer rows.Close()
	var ns string
	for rows.Next() {
		if err := rows.Scan(&ns); err != nil {
			return err
		}
		a.namespaces.add(a.cluster, ns)
	}
	return rows.Err()
}

// collectNamespacesAndNodes reads (namespace, node) rows; node may be "".
func (a *applier) collectNamespacesAndNodes(rows pgx.Rows) error {
	defer rows.Close()
	var ns, node string
	for rows.Next() {
		if err := rows.Scan(&ns, &node); err != nil {
			return err
		}
		a.namespaces.add(a.cluster, ns)
		a.nodes.add(a.cluster, node)
	}
	return rows.Err()
}

// lastByKey drops earlier duplicates (an upsert may touch a row only once).
func lastByKey[T any](items []T, key func(T) string) []T {
	index := make(map[string]int, len(items))
	out := make([]T, 0, len(items))
	for _, it := range items {
		k := key(it)
		if i, ok := index[k]; ok {
			out[i] = it
			continue
		}
		index[k] = len(out)
		out = append(out, it)
	}
	return out
}

func splitKeys(keys []store.ObjectKey) (namespaces, names []string) {
	namespaces, names = make([]string, len(keys)), make([]string, len(keys))
	for i, k := range keys {
		namespaces[i], names[i] = k.Namespace, k.Name
	}
	return namespaces, names
}

func namespaceNames(nss []store.Namespace) []string {
	out := make([]string, len(nss))
	for i, n := range nss {
		out[i] = n.Name
	}
	return out
}

func nodeNames(nodes []store.Node) []string {
	out := make([]string, len(nodes))
	for i, n := range nodes {
		out[i] = n.Name
	}
	return out
}

// mustJSON encodes maps and slices of plain values; nil becomes empty.
func mustJSON[T any](v T, empty string) string {
	b, err := json.Marshal(v)
	if err != nil || string(b) == "null" {
		return empty
	}
	return string(b)
}

func timeOrNil(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// prefixed qualifies a comma-separated column list: "a, b" → "p.a, p.b".
func prefixed(prefix, cols string) string {
	parts := splitCols(cols)
	for i, c := range parts {
		parts[i] = prefix + "." + c
	}
	return strings.Join(parts, ", ")
}

// assignExcluded renders "a = EXCLUDED.a, b = EXCLUDED.b".
func assignExcluded(cols string) string {
	parts := splitCols(cols)
	for i, c := range parts {
		parts[i] = c + " = EXCLUDED." + c
	}
	return strings.Join(parts, ", ")
}

func splitCols(cols string) []string {
	parts := strings.Split(cols, ",")
	for i, p := range parts {
		parts[i] = strings.TrimSpace(p)
	}
	return parts
}
