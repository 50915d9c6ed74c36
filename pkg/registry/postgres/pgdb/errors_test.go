package pgdb

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5/pgconn"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/example/platform-apiserver/pkg/apis/platform"
	"github.com/example/platform-apiserver/pkg/registry"
	"github.com/example/platform-apiserver/pkg/registry/store"
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
			err := registry.APIError(fmt.Errorf("list nodecapacities: %w", InterpretError(pgErr)), platform.Resource("nodecapacities"), "")
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

// TestConnectTimeoutIsUnavailable: a connect that timed out (a hung or
// unreachable host) is a 503 without Retry-After, not a 504 whose
// Retry-After makes client-go retry the request against the hung host.
func TestConnectTimeoutIsUnavailable(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	// A listener that accepts and never answers: a SIGSTOPped server.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, err = pgconn.Connect(ctx, "postgres://u@"+l.Addr().String()+"/db?sslmode=disable")
	if err == nil {
		t.Fatal("connect to a listener that never answers succeeded")
	}
	if err = InterpretError(err); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("InterpretError(connect timeout) = %v, want ErrUnavailable", err)
	}
	status, ok := registry.APIError(err, platform.Resource("nodecapacities"), "").(apierrors.APIStatus)
	if !ok || status.Status().Code != http.StatusServiceUnavailable {
		t.Fatalf("APIError = %v, want 503", status)
	}
	if d := status.Status().Details; d != nil && d.RetryAfterSeconds > 0 {
		t.Errorf("Retry-After %d s on an unreachable registry, want none", d.RetryAfterSeconds)
	}
}
