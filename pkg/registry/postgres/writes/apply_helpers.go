package writes

import (
	"bytes"
	"encoding/json"
	"fmt"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/example/platform-apiserver/pkg/registry/store"
)

// collectNames adds the names in rows (one text column: namespaces or
// nodes whose aggregates change) to into.
func (a *applier) collectNames(rows pgx.Rows, into pairs) error {
	defer rows.Close()
	var name string
	for rows.Next() {
		if err := rows.Scan(&name); err != nil {
			return err
		}
		into.add(a.cluster, name)
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

// keyRow is a (namespace, name) key in a statement's jsonb parameter.
type keyRow struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
}

// keyRows turns object keys into rows for JSONRows, rejecting text that
// PostgreSQL would not store.
func keyRows(keys []store.ObjectKey) ([]keyRow, error) {
	out := make([]keyRow, len(keys))
	for i, k := range keys {
		if err := CheckText("object key", k.Namespace, k.Name); err != nil {
			return nil, err
		}
		out[i] = keyRow{Namespace: k.Namespace, Name: k.Name}
	}
	return out, nil
}

// JSONRows encodes a batch's rows as one JSON array: the single jsonb
// parameter ($n::jsonb) a statement decodes with jsonb_to_recordset, whose
// column list names the rows' json keys. Numbers keep their precision: Go
// writes an int64 as its exact decimal digits and a bigint column parses
// them exactly (no float64 on the way). A string with a NUL character is
// written as \u0000, which jsonb rejects (SQLSTATE 22P05, a data
// exception: store.ErrRejected), as PostgreSQL rejected it in a text array.
// rows must not be nil (that would encode as null, not an empty array).
func JSONRows[T any](rows []T) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(rows); err != nil {
		return nil, fmt.Errorf("%w: encode rows: %w", store.ErrRejected, err)
	}
	return buf.Bytes(), nil
}

// CheckText rejects a string that is not valid UTF-8, which PostgreSQL
// refuses in a text column (SQLSTATE 22021) and which encoding/json would
// silently turn into U+FFFD: the registry stores what it was given or
// nothing, and discovery quarantines the object (store.ErrRejected).
func CheckText(what string, values ...string) error {
	for _, v := range values {
		if !utf8.ValidString(v) {
			return fmt.Errorf("%w: %s %q is not valid UTF-8", store.ErrRejected, what, v)
		}
	}
	return nil
}
