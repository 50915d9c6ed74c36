package views

import (
	"fmt"
	"reflect"
	"slices"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
)

// rawRows are a result's rows as the server sent them, copied out of the
// connection's buffer so they can be decoded after the transaction ended:
// decoding (JSON columns, on a busy server) then never keeps a
// transaction, or the server waiting for its client, open.
type rawRows struct {
	fields []pgconn.FieldDescription
	values [][][]byte
	// plans are the scan plans of the columns, made for the first row and
	// remade when a row scans into other types (as pgx's own rows do).
	m     *pgtype.Map
	plans []pgtype.ScanPlan
	types []reflect.Type
}

// readRaw reads every row of rows, copying the values (NULL stays nil).
func readRaw(rows pgx.Rows) (*rawRows, error) {
	defer rows.Close()
	r := &rawRows{fields: slices.Clone(rows.FieldDescriptions()), m: pgtype.NewMap()}
	for rows.Next() {
		vals := rows.RawValues()
		row := make([][]byte, len(vals))
		for i, v := range vals {
			row[i] = slices.Clone(v)
		}
		r.values = append(r.values, row)
	}
	return r, rows.Err()
}

// row returns row i as a pgx.Row.
func (r *rawRows) row(i int) pgx.Row { return rawRow{rows: r, values: r.values[i]} }

// rawRow is one of rawRows, scanned as pgx scans a row.
type rawRow struct {
	rows   *rawRows
	values [][]byte
}

func (r rawRow) Scan(dest ...any) error {
	rr := r.rows
	if len(dest) != len(rr.fields) {
		return fmt.Errorf("number of field descriptions must equal number of destinations, got %d and %d", len(rr.fields), len(dest))
	}
	if rr.plans == nil {
		rr.plans, rr.types = make([]pgtype.ScanPlan, len(dest)), make([]reflect.Type, len(dest))
	}
	for i, dst := range dest {
		if dst == nil {
			continue
		}
		f := rr.fields[i]
		if t := reflect.TypeOf(dst); rr.plans[i] == nil || rr.types[i] != t {
			rr.plans[i], rr.types[i] = rr.m.PlanScan(f.DataTypeOID, f.Format, dst), t
		}
		if err := rr.plans[i].Scan(r.values[i], dst); err != nil {
			return pgx.ScanArgError{ColumnIndex: i, FieldName: f.Name, Err: err}
		}
	}
	return nil
}
