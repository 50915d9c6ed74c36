package postgres

import (
	"context"
	"strings"
	"testing"

	pgtest "github.com/example/platform-apiserver/test/framework/postgres"
)

// TestIdleInTransactionTimeout: the store's sessions let PostgreSQL end a
// transaction left idle (a stalled replica holding locks), unless the DSN
// chose otherwise.
func TestIdleInTransactionTimeout(t *testing.T) {
	t.Parallel()
	dsn := pgtest.NewTestDatabase(t)
	for _, tc := range []struct{ dsn, want string }{
		{dsn, idleInTransactionTimeout},
		{withParam(dsn, idleInTransactionParam, "3s"), "3s"},
	} {
		s, err := Open(context.Background(), tc.dsn, Options{})
		if err != nil {
			t.Fatal(err)
		}
		var got string
		if err := s.reads.QueryRow(t.Context(), `SHOW `+idleInTransactionParam).Scan(&got); err != nil {
			t.Fatal(err)
		}
		s.Close()
		if got != tc.want {
			t.Errorf("DSN %q: %s = %q, want %q", tc.dsn, idleInTransactionParam, got, tc.want)
		}
	}
}

// withParam adds a parameter to a URL or keyword/value DSN.
func withParam(dsn, key, value string) string {
	switch {
	case !strings.HasPrefix(dsn, "postgres://") && !strings.HasPrefix(dsn, "postgresql://"):
		return dsn + " " + key + "=" + value
	case strings.Contains(dsn, "?"):
		return dsn + "&" + key + "=" + value
	default:
		return dsn + "?" + key + "=" + value
	}
}
