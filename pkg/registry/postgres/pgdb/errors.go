package pgdb

import (
	"context"
	"errors"
	"fmt"
	"net"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/example/platform-apiserver/pkg/registry/store"
)

// writeProtocolRefused is the SQLSTATE of a publish from a replica whose
// write protocol the registry no longer accepts (migration 028).
const writeProtocolRefused = "PR001"

// InterpretError maps pgx errors to the store's errors; every method passes
// its database errors through it. Unknown errors are returned unchanged.
func InterpretError(err error) error {
	if err == nil {
		return nil
	}
	for _, mapped := range []error{store.ErrNotFound, store.ErrUnavailable, store.ErrTimeout, store.ErrRejected, store.ErrTooComplex, store.ErrBusy} {
		if errors.Is(err, mapped) {
			return err // mapped already, deeper down
		}
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("%w: %w", store.ErrNotFound, err)
	}
	if pgErr, ok := errors.AsType[*pgconn.PgError](err); ok {
		switch code := pgErr.Code; {
		case code == pgerrcode.UndefinedTable, // not migrated
			code == pgerrcode.InvalidCatalogName, // no such database
			code == pgerrcode.TooManyConnections,
			code == pgerrcode.AdminShutdown,
			code == pgerrcode.CrashShutdown,
			code == pgerrcode.CannotConnectNow,
			code == writeProtocolRefused, // this release may not write beside a newer one
			inClass(code, pgerrcode.ConnectionException):
			return fmt.Errorf("%w: %w", store.ErrUnavailable, err)
		case code == pgerrcode.QueryCanceled: // statement_timeout or a cancel request
			return fmt.Errorf("%w: %w", store.ErrTimeout, err)
		case inClass(code, pgerrcode.DataException), // e.g. a NUL in text or jsonb, invalid UTF-8, a number out of range
			inClass(code, pgerrcode.IntegrityConstraintViolation):
			return fmt.Errorf("%w: %w", store.ErrRejected, err)
		case inClass(code, pgerrcode.ProgramLimitExceeded): // e.g. statement_too_complex, too_many_arguments
			return fmt.Errorf("%w: %w", store.ErrTooComplex, err)
		}
		return err
	}
	if _, ok := errors.AsType[*pgconn.ConnectError](err); ok {
		// Before the deadline check: a connect that timed out (a hung or
		// unreachable host) is the database unavailable, not a slow answer
		// for the client to retry (a 504's Retry-After made client-go
		// retry a list against a hung primary ten times over).
		return fmt.Errorf("%w: %w", store.ErrUnavailable, err)
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err // the caller gave up; the database may be fine
	}
	if _, ok := errors.AsType[net.Error](err); ok {
		return fmt.Errorf("%w: %w", store.ErrUnavailable, err)
	}
	return err
}

// inClass reports whether SQLSTATE code is in the class of classCode (a
// class's generic code, such as pgerrcode.DataException, "22000"): the
// first two characters. pgerrcode's Is<Class> functions list the codes they
// know; a class holds whatever codes a newer server adds, which must map
// the same way.
func inClass(code, classCode string) bool {
	return len(code) == 5 && code[:2] == classCode[:2]
}
