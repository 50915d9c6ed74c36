package postgres

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/example/platform-apiserver/pkg/registry/store"
)

// interpretError maps pgx errors to the store's errors; every method passes
// its database errors through it. Unknown errors are returned unchanged.
func interpretError(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("%w: %w", store.ErrNotFound, err)
	}
	if pgErr, ok := errors.AsType[*pgconn.PgError](err); ok {
		switch {
		case pgErr.Code == "42P01", // undefined_table: not migrated
			pgErr.Code == "3D000",                          // invalid_catalog_name: no such database
			pgErr.Code == "53300",                          // too_many_connections
			pgErr.Code == "57P01",                          // admin_shutdown
			pgErr.Code == "57P02",                          // crash_shutdown
			pgErr.Code == "57P03",                          // cannot_connect_now
			len(pgErr.Code) == 5 && pgErr.Code[:2] == "08": // connection_exception class
			return fmt.Errorf("%w: %w", store.ErrUnavailable, err)
		case pgErr.Code == "57014": // query_canceled: statement_timeout or a cancel request
			return fmt.Errorf("%w: %w", store.ErrTimeout, err)
		case strings.HasPrefix(pgErr.Code, "22"), // data_exception, e.g. a NUL in text or jsonb
			strings.HasPrefix(pgErr.Code, "23"): // integrity_constraint_violation
			return fmt.Errorf("%w: %w", store.ErrRejected, err)
		}
		return err
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err // the caller gave up; the database may be fine
	}
	var connectErr *pgconn.ConnectError
	var netErr net.Error
	if errors.As(err, &connectErr) || errors.As(err, &netErr) {
		return fmt.Errorf("%w: %w", store.ErrUnavailable, err)
	}
	return err
}
