package postgres

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5/pgconn"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/example/platform-apiserver/pkg/apis/platform"
	"github.com/example/platform-apiserver/pkg/registry"
)

// TestRequestRejectionsAreBadRequests: what PostgreSQL refuses because of
// the request's values is a 400 in our words, never the database's text;
// what it refuses because of the server is not.
func TestRequestRejectionsAreBadRequests(t *testing.T) {
	t.Parallel()
	const dbText = "invalid byte sequence for encoding \"UTF8\": 0x00"
	for _, tc := range []struct {
		name string
		code string
		want int32
	}{
		{"NUL or invalid UTF-8 in text", pgerrcode.CharacterNotInRepertoire, http.StatusBadRequest},
		{"untranslatable character (\\u0000 in jsonb)", pgerrcode.UntranslatableCharacter, http.StatusBadRequest},
		{"invalid text representation", pgerrcode.InvalidTextRepresentation, http.StatusBadRequest},
		{"numeric value out of range", pgerrcode.NumericValueOutOfRange, http.StatusBadRequest},
		{"string data right truncation", pgerrcode.StringDataRightTruncationDataException, http.StatusBadRequest},
		{"a data exception a newer server adds", "22ZZZ", http.StatusBadRequest},
		{"program limit exceeded", pgerrcode.ProgramLimitExceeded, http.StatusBadRequest},
		{"statement too complex", pgerrcode.StatementTooComplex, http.StatusBadRequest},
		{"too many arguments", pgerrcode.TooManyArguments, http.StatusBadRequest},
		{"statement timeout", pgerrcode.QueryCanceled, http.StatusGatewayTimeout},
		{"not migrated", pgerrcode.UndefinedTable, http.StatusServiceUnavailable},
		{"our SQL is wrong", pgerrcode.SyntaxError, http.StatusInternalServerError},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pgErr := &pgconn.PgError{Severity: "ERROR", Code: tc.code, Message: dbText}
			err := registry.APIError(fmt.Errorf("list nodecapacities: %w", interpretError(pgErr)), platform.Resource("nodecapacities"), "")
			var status apierrors.APIStatus
			if !errors.As(err, &status) {
				t.Fatalf("APIError = %T %v, want a status error", err, err)
			}
			if got := status.Status().Code; got != tc.want {
				t.Errorf("code %d, want %d: %v", got, tc.want, err)
			}
			if tc.want == http.StatusBadRequest {
				if msg := status.Status().Message; strings.Contains(msg, dbText) || strings.Contains(msg, "SQLSTATE") || strings.Contains(msg, tc.code) {
					t.Errorf("the 400 echoes the database: %q", msg)
				}
			}
		})
	}
}
