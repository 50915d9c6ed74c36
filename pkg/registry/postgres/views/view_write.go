package views

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/example/platform-apiserver/pkg/registry/store"
)

// A view's input columns (column.sqlType set) are what discovery's batches
// write; the others the registry derives (aggregates, usage). The upsert of
// a batch's rows is built from them.

// Field declares an input column holding the field target points to.
func Field[R, F any](name, sqlType string, target func(*R) *F) Column[R] {
	return Column[R]{name: name, sqlType: sqlType, target: func(r *R) any { return target(r) }, value: func(r *R) any { return *target(r) }}
}

// inputs are the view's input columns.
func (v *View[R]) inputs() []Column[R] {
	var in []Column[R]
	for _, c := range v.Columns {
		if c.sqlType != "" {
			in = append(in, c)
		}
	}
	return in
}

// upsertStatement upserts member $1's rows of the view from $2, a JSON
// array of BatchRows' objects, and returns the highest resourceVersion it
// stamped (0 if none). Rows whose input columns do not change are left
// alone: the input is filtered against the current row first, so no
// version is spent on a no-op, and the ON CONFLICT update is
// guarded the same way. The rows' key is (cluster_id, name). A view with
// aggregates takes their values for every row of $2 from $3, a JSON array
// of rows of the table's type (computeAggregates), so a new row is written
// once, with its aggregates, not inserted and then updated.
func (v *View[R]) upsertStatement() string {
	in := v.inputColumns()
	names, compared, values, join, with := in.names, in.compared, qualified("i.", in.names), "", in.input
	if len(v.Aggregates) > 0 {
		with += ", a AS (\n\tSELECT * FROM jsonb_populate_recordset(NULL::" + v.Table + ", $3::jsonb)\n)"
		names, compared = append(slices.Clone(names), v.Aggregates...), append(slices.Clone(compared), v.Aggregates...)
		values += ", " + qualified("a.", v.Aggregates)
		join = " LEFT JOIN a ON a.name = i.name"
	}
	sets := make([]string, len(compared))
	for i, c := range compared {
		sets[i] = c + " = EXCLUDED." + c
	}
	return fmt.Sprintf(`WITH %[2]s, changed AS (
	INSERT INTO %[1]s AS c (cluster_id, %[3]s, resource_version)
	SELECT $1::text, %[4]s, registry_next_rv()
	%[5]s
	ON CONFLICT (cluster_id, name) DO UPDATE SET %[6]s, resource_version = EXCLUDED.resource_version
	WHERE (%[7]s) IS DISTINCT FROM (%[8]s)
	RETURNING c.resource_version)
SELECT coalesce(max(resource_version), 0) FROM changed`,
		v.Table, with, strings.Join(names, ", "), values, in.changedFrom(v.Table, join),
		strings.Join(sets, ", "), qualified("c.", compared), qualified("EXCLUDED.", compared))
}

// stampStatement writes the aggregates in $1 (a JSON array of rows of the
// table's type, computeAggregates') to the member rows they name and stamps
// those whose values change; $2 is the writer's start resourceVersion: a row
// already stamped by this transaction (above it) keeps its version, so one
// commit gives each row one version. It returns the highest version stamped
// (0 if none).
func (v *View[R]) stampStatement() string {
	sets := make([]string, len(v.Aggregates))
	for i, c := range v.Aggregates {
		sets[i] = c + " = v." + c
	}
	return fmt.Sprintf(`WITH v AS (
	SELECT * FROM jsonb_populate_recordset(NULL::%[1]s, $1::jsonb)
), changed AS (
	UPDATE %[1]s r SET %[2]s,
		resource_version = CASE WHEN r.resource_version > $2 THEN r.resource_version ELSE registry_next_rv() END
	FROM v
	WHERE r.cluster_id = v.cluster_id AND r.name = v.name AND (%[3]s) IS DISTINCT FROM (%[4]s)
	RETURNING r.resource_version
)
SELECT coalesce(max(resource_version), 0) FROM changed`,
		v.Table, strings.Join(sets, ", "), qualified("r.", v.Aggregates), qualified("v.", v.Aggregates))
}

// UpsertSQL is the view's upsert of a member's batch rows
// (upsertStatement); "" for a view without input columns.
func (v *View[R]) UpsertSQL() string { return v.upsertSQL }

// StampSQL is the view's write of aggregates (stampStatement); "" for a
// view without aggregates.
func (v *View[R]) StampSQL() string { return v.stampSQL }

// ChangedSQL is the view's query of the batch rows its upsert would write
// (changedStatement); "" for a view without input columns.
func (v *View[R]) ChangedSQL() string { return v.changedSQL }

// changedStatement returns the names of the rows in $2 (as upsertStatement
// reads them) that it would write for member $1: new ones, and those whose
// input columns differ from the current row's. Apply runs it under the
// member's lock, which every writer of the member's rows holds, so the
// answer holds until its commit and a commit ticket is taken only for
// the rows that change.
func (v *View[R]) changedStatement() string {
	in := v.inputColumns()
	return fmt.Sprintf("WITH %s\nSELECT i.name\n\t%s", in.input, in.changedFrom(v.Table, ""))
}

// inputs are a view's input columns as upsertStatement and
// changedStatement read them.
type inputs struct {
	// input is the CTE "i" decoding $2; names are its columns, compared
	// those but the name.
	input           string
	names, compared []string
}

func (v *View[R]) inputColumns() inputs {
	var in inputs
	var decl []string
	for _, c := range v.inputs() {
		decl = append(decl, c.name+" "+c.sqlType)
		in.names = append(in.names, c.name)
		if c.name != "name" {
			in.compared = append(in.compared, c.name)
		}
	}
	in.input = "i AS (\n\tSELECT * FROM jsonb_to_recordset($2::jsonb) AS i(" + strings.Join(decl, ", ") + ")\n)"
	return in
}

// changedFrom is the FROM (with join, if any) and WHERE clauses that keep
// the input rows that are new to table or differ from its current row.
func (in inputs) changedFrom(table, join string) string {
	return fmt.Sprintf("FROM i LEFT JOIN %[1]s cur ON cur.cluster_id = $1::text AND cur.name = i.name%[4]s\n\tWHERE cur.name IS NULL OR (%[2]s) IS DISTINCT FROM (%[3]s)",
		table, qualified("cur.", in.compared), qualified("i.", in.compared), join)
}

// qualified prefixes each column.
func qualified(prefix string, cols []string) string {
	out := make([]string, len(cols))
	for i, c := range cols {
		out[i] = prefix + c
	}
	return strings.Join(out, ", ")
}

// BatchRows encodes records as the JSON array of objects the upsert
// statement reads: one member per input column.
func (v *View[R]) BatchRows(records []R) ([]byte, error) {
	in := v.inputs()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	buf.WriteByte('[')
	for i := range records {
		if i > 0 {
			buf.WriteByte(',')
		}
		buf.WriteByte('{')
		for j, c := range in {
			if j > 0 {
				buf.WriteByte(',')
			}
			buf.WriteString(`"` + c.name + `":`)
			if err := appendValue(&buf, enc, c.value(&records[i])); err != nil {
				return nil, fmt.Errorf("%w: encode %s %s: %w", store.ErrRejected, v.Resource, c.name, err)
			}
		}
		buf.WriteByte('}')
	}
	buf.WriteByte(']')
	return buf.Bytes(), nil
}

// JSONField declares a jsonb input column holding a map or a slice; nil is
// written as empty ("{}" or "[]"), so the column is never JSON null.
func JSONField[R, F any](name string, target func(*R) *F, empty string) Column[R] {
	return Column[R]{name: name, sqlType: "jsonb", target: func(r *R) any { return target(r) }, value: func(r *R) any { return RawJSON(*target(r), empty) }}
}

// RawJSON encodes the value of a jsonb column (maps and slices of plain
// values); nil, or a value that cannot be encoded, becomes empty.
func RawJSON[T any](v T, empty string) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil || string(b) == "null" {
		return json.RawMessage(empty)
	}
	return b
}

// timeOrNil is a timestamptz value: nil for the zero time, else the time in
// UTC (a zone offset in seconds has no RFC 3339 form) to the microsecond,
// PostgreSQL's resolution, truncated as pgx truncated it.
func timeOrNil(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	t = t.UTC().Truncate(time.Microsecond)
	return &t
}

// appendValue writes v as JSON: the column types views use directly, as
// encoding/json writes them, anything else through enc.
func appendValue(buf *bytes.Buffer, enc *json.Encoder, v any) error {
	switch v := v.(type) {
	case string:
		if plainJSONString(v) {
			buf.WriteByte('"')
			buf.WriteString(v)
			buf.WriteByte('"')
			return nil
		}
	case int64:
		buf.Write(strconv.AppendInt(buf.AvailableBuffer(), v, 10))
		return nil
	case bool:
		buf.Write(strconv.AppendBool(buf.AvailableBuffer(), v))
		return nil
	case json.RawMessage:
		buf.Write(v)
		return nil
	case *time.Time:
		if v == nil {
			buf.WriteString("null")
			return nil
		}
		buf.WriteByte('"')
		buf.Write(v.AppendFormat(buf.AvailableBuffer(), time.RFC3339Nano))
		buf.WriteByte('"')
		return nil
	}
	return enc.Encode(v)
}

// plainJSONString reports whether s needs no escaping in JSON (printable
// ASCII other than the quote and the backslash; encoding/json's HTML
// escaping is off).
func plainJSONString(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}
