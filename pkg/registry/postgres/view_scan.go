package postgres

import (
	"fmt"
	"time"
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
