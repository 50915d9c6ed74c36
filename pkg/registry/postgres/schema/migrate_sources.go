package schema

import (
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"path"
	"strings"

	"github.com/jackc/pgx/v5"
)

// Every function of the registry (trigger functions and aggregates too) has
// one file, functions/<function name>.sql, holding its current
// definition (CREATE OR REPLACE) and the triggers that run it; versioned
// migrations hold tables, indexes and data (docs/registry.md, "Where the
// schema lives"). Migrate applies a file after the migrations when it
// changed, or when its function or triggers are no longer what applying it
// left.
//
//go:embed functions/*.sql
var functionFiles embed.FS

// functionsDir is the sources' directory in the package (and in the
// embedded files); errors name it as it is under pkg/registry/postgres.
const functionsDir = "functions"

var (
	sqlMigrateSourcesCreateTable = statement("migrate_sources_create_table")
	sqlMigrateSourcesState       = statement("migrate_sources_state")
	sqlMigrateSourcesRecord      = statement("migrate_sources_record")
	sqlMigrateSourcesForget      = statement("migrate_sources_forget")
	sqlMigrateSourcesUnchecked   = statement("migrate_sources_bodies_unchecked")
)

// lastMigrationWithFunctions is the newest migration that may define a
// function or trigger: later ones leave them to functions/, and may call
// the ones marked calledByMigrationsLine.
const lastMigrationWithFunctions = 28

// calledByMigrationsLine is the first line of a function source that
// migrations may call (registry_define_view): Migrate applies it before
// the first pending migration after lastMigrationWithFunctions as well as
// after the migrations, so a registry migrated from empty has it when they
// run. Such a file uses only what migrations up to
// lastMigrationWithFunctions made.
const calledByMigrationsLine = "-- registry:called-by-migrations\n"

// functionSource is one file of functions/.
type functionSource struct {
	Name   string // the function's, and the file's without .sql
	SQL    string
	SHA256 string // of the file, hex
}

// functionSources reads functions/*.sql from fsys, in name order.
func functionSources(fsys fs.FS) ([]functionSource, error) {
	entries, err := fs.ReadDir(fsys, functionsDir)
	if err != nil {
		return nil, err
	}
	var out []functionSource
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), ".sql")
		if !ok || e.IsDir() {
			return nil, fmt.Errorf("schema/%s/%s: want <function name>.sql", functionsDir, e.Name())
		}
		body, err := fs.ReadFile(fsys, path.Join(functionsDir, e.Name()))
		if err != nil {
			return nil, err
		}
		sum := sha256.Sum256(body)
		out = append(out, functionSource{Name: name, SQL: string(body), SHA256: hex.EncodeToString(sum[:])})
	}
	return out, nil
}

// calledByMigrations are the sources marked calledByMigrationsLine.
func calledByMigrations(sources []functionSource) []functionSource {
	var called []functionSource
	for _, src := range sources {
		if strings.HasPrefix(src.SQL, calledByMigrationsLine) {
			called = append(called, src)
		}
	}
	return called
}

// applyUnrecorded applies sources in tx without recording them: their
// application after the migrations records them.
func applyUnrecorded(ctx context.Context, tx pgx.Tx, sources []functionSource) error {
	if _, err := tx.Exec(ctx, sqlMigrateSourcesUnchecked); err != nil {
		return err
	}
	for _, src := range sources {
		if _, err := tx.Exec(ctx, src.SQL); err != nil {
			return fmt.Errorf("schema/%s/%s.sql: %w", functionsDir, src.Name, err)
		}
	}
	return nil
}

// sourceState is what migrate_sources_state says of one source.
type sourceState struct {
	sha256, recordedDefinition, definition *string
}

// applyFunctionSources brings the functions to their sources in tx: it
// applies, in name order, each source never applied, changed since it was
// (its file's sha256), or whose definition (its function's, with the
// triggers that run it and the aggregates it steps) is no longer the one
// applying it left (a migration or a person replaced or dropped it),
// records each, and forgets sources this binary does not have. It returns
// the names it applied.
func applyFunctionSources(ctx context.Context, tx pgx.Tx, sources []functionSource) ([]string, error) {
	if _, err := tx.Exec(ctx, sqlMigrateSourcesCreateTable); err != nil {
		return nil, fmt.Errorf("create registry_schema_sources: %w", err)
	}
	names := make([]string, len(sources))
	for i, src := range sources {
		names[i] = src.Name
	}
	states, err := readSourceStates(ctx, tx, names)
	if err != nil {
		return nil, err
	}
	var applied []functionSource
	for _, src := range sources {
		st := states[src.Name]
		if st.sha256 == nil || *st.sha256 != src.SHA256 || st.definition == nil || *st.recordedDefinition != *st.definition {
			applied = append(applied, src)
		}
	}
	var done []string
	if len(applied) > 0 {
		if err := applyUnrecorded(ctx, tx, applied); err != nil {
			return nil, err
		}
		if done, err = recordFunctionSources(ctx, tx, applied); err != nil {
			return nil, err
		}
	}
	if _, err := tx.Exec(ctx, sqlMigrateSourcesForget, names); err != nil {
		return nil, fmt.Errorf("forget function sources: %w", err)
	}
	return done, nil
}

// recordFunctionSources records the sources applied, with the sha256 of
// the definitions they left, and returns their names.
func recordFunctionSources(ctx context.Context, tx pgx.Tx, applied []functionSource) ([]string, error) {
	names := make([]string, len(applied))
	for i, src := range applied {
		names[i] = src.Name
	}
	states, err := readSourceStates(ctx, tx, names)
	if err != nil {
		return nil, err
	}
	shas, definitions := make([]string, len(applied)), make([]string, len(applied))
	for i, src := range applied {
		def := states[src.Name].definition
		if def == nil {
			return nil, fmt.Errorf("schema/%s/%s.sql defines no function %s", functionsDir, src.Name, src.Name)
		}
		shas[i], definitions[i] = src.SHA256, *def
	}
	if _, err := tx.Exec(ctx, sqlMigrateSourcesRecord, names, shas, definitions); err != nil {
		return nil, fmt.Errorf("record the function sources: %w", err)
	}
	return names, nil
}

func readSourceStates(ctx context.Context, tx pgx.Tx, names []string) (map[string]sourceState, error) {
	rows, err := tx.Query(ctx, sqlMigrateSourcesState, names)
	if err != nil {
		return nil, fmt.Errorf("read registry_schema_sources: %w", err)
	}
	states := make(map[string]sourceState, len(names))
	var (
		name string
		st   sourceState
	)
	_, err = pgx.ForEachRow(rows, []any{&name, &st.sha256, &st.recordedDefinition, &st.definition}, func() error {
		states[name] = st
		st = sourceState{} // the next row's scan allocates anew
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read registry_schema_sources: %w", err)
	}
	return states, nil
}
