package views

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/example/platform-apiserver/pkg/registry/store"
)

// Scan targets for view columns (view.go) whose value needs converting.

// orZero scans a nullable column into *into, NULL as the zero value.
type orZero[T any] struct{ into *T }

func nullable[T any](into *T) orZero[T] { return orZero[T]{into: into} }

// Scan implements sql.Scanner, which pgx calls with the column's Go value.
func (z orZero[T]) Scan(src any) error {
	if src == nil {
		var zero T
		*z.into = zero
		return nil
	}
	v, ok := src.(T)
	if !ok {
		return fmt.Errorf("cannot scan %T into %T", src, *z.into)
	}
	*z.into = v
	return nil
}

// seconds scans a nullable double precision number of seconds into a
// duration, NULL as zero.
type seconds struct{ into *time.Duration }

// Scan implements sql.Scanner.
func (s seconds) Scan(src any) error {
	var f float64
	if err := nullable(&f).Scan(src); err != nil {
		return err
	}
	*s.into = time.Duration(f * float64(time.Second))
	return nil
}

// amounts scans a jsonb object of whole numbers (a view's *_other
// columns: other resources by name) into a map, NULL (a change-log entry
// from before migration 015) and {} as nil; a sum beyond int64 saturates,
// as the other sums do.
type amounts struct{ into *map[string]int64 }

// jsonbBytes is a jsonb column's value as a scanner gets it (pgx passes
// jsonb as text or bytes), nil for NULL.
func jsonbBytes(src any, into string) ([]byte, error) {
	switch src := src.(type) {
	case nil:
		return nil, nil
	case string:
		return []byte(src), nil
	case []byte:
		return src, nil
	default:
		return nil, fmt.Errorf("cannot scan %T into %s", src, into)
	}
}

// Scan implements sql.Scanner.
func (a amounts) Scan(src any) error {
	raw, err := jsonbBytes(src, "resource amounts")
	if err != nil {
		return err
	}
	if raw == nil {
		*a.into = nil
		return nil
	}
	var m map[string]json.Number
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil {
		return fmt.Errorf("resource amounts: %w", err)
	}
	if len(m) == 0 {
		*a.into = nil
		return nil
	}
	out := make(map[string]int64, len(m))
	for k, v := range m {
		n, err := strconv.ParseInt(v.String(), 10, 64)
		switch {
		case err == nil:
			out[k] = n
		case errors.Is(err, strconv.ErrRange):
			out[k] = n // ParseInt saturates: MaxInt64 or MinInt64
		default:
			return fmt.Errorf("resource amounts: %s is %q, not a whole number", k, v)
		}
	}
	*a.into = out
	return nil
}

// otherField declares an input column of other resources (store.Quantities.Other).
func otherField[R any](name string, target func(*R) *map[string]int64) Column[R] {
	c := JSONField(name, target, "{}")
	c.target = func(r *R) any { return amounts{target(r)} }
	return c
}

// otherCol declares a derived column of other resources.
func otherCol[R any](name string, target func(*R) *map[string]int64) Column[R] {
	return Column[R]{name: name, target: func(r *R) any { return amounts{target(r)} }}
}

// decimals scans a jsonb object of numbers that need not be whole (the
// committed quota, in base units: 0.5 cores) into their decimal texts by
// key; nil for NULL (a change-log entry from before the column) or {}.
type decimals struct{ into *map[string]string }

// Scan implements sql.Scanner.
func (d decimals) Scan(src any) error {
	raw, err := jsonbBytes(src, "decimal amounts")
	if err != nil || raw == nil {
		*d.into = nil
		return err
	}
	var m map[string]json.Number
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil {
		return fmt.Errorf("decimal amounts: %w", err)
	}
	if len(m) == 0 {
		*d.into = nil
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v.String()
	}
	*d.into = out
	return nil
}

// decimalCol declares a jsonb column of decimal amounts (decimals).
func decimalCol[R any](name string, target func(*R) *map[string]string) Column[R] {
	return Column[R]{name: name, target: func(r *R) any { return decimals{target(r)} }}
}

// deviceCounts scans one of a node's or member's device columns
// (devices_total, devices_allocated: counts per driver) into the counts per
// driver; the two columns fill the same map, in either order.
type deviceCounts struct {
	into      *map[string]store.DeviceCount
	allocated bool
}

// Scan implements sql.Scanner.
func (d deviceCounts) Scan(src any) error {
	var counts map[string]int64
	if err := (amounts{&counts}).Scan(src); err != nil {
		return err
	}
	if len(counts) == 0 {
		return nil
	}
	if *d.into == nil {
		*d.into = make(map[string]store.DeviceCount, len(counts))
	}
	for driver, n := range counts {
		c := (*d.into)[driver]
		if d.allocated {
			c.Allocated = n
		} else {
			c.Total = n
		}
		(*d.into)[driver] = c
	}
	return nil
}

// deviceCols declares the two derived device columns of a view.
func deviceCols[R any](prefix string, target func(*R) *map[string]store.DeviceCount) []Column[R] {
	return []Column[R]{
		{name: prefix + "_total", target: func(r *R) any { return deviceCounts{into: target(r)} }},
		{name: prefix + "_allocated", target: func(r *R) any { return deviceCounts{into: target(r), allocated: true} }},
	}
}
