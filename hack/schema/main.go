// Command schema writes the registry's schema as pkg/registry/postgres/schema/schema.sql
// holds it: it starts a throwaway PostgreSQL (the binaries of `pg_config
// --bindir`, else /usr/lib/postgresql/15/bin) on 127.0.0.1, migrates an empty
// database with Store.Migrate and dumps it (schema.DumpSchema). Used by
// hack/update-schema.sh and hack/verify-schema.sh.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/url"
	"os"
	"time"

	"github.com/jackc/pgx/v5"
	"k8s.io/klog/v2"

	"github.com/example/platform-apiserver/pkg/registry/postgres"
	"github.com/example/platform-apiserver/pkg/registry/postgres/schema"
	pgtest "github.com/example/platform-apiserver/test/framework/postgres"
)

func main() {
	klog.InitFlags(nil)
	output := flag.String("output", "", "the file to write the schema to (required)")
	flag.Parse()
	if *output == "" {
		fmt.Fprintln(os.Stderr, "--output is required")
		os.Exit(2)
	}
	// The migrations' progress shows with -v=1.
	ctx := klog.NewContext(context.Background(), klog.Background().V(1))
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	err := run(ctx, *output)
	cancel()
	if err != nil {
		klog.Background().Error(err, "Writing the registry schema failed")
		klog.FlushAndExit(klog.ExitFlushTimeout, 1)
	}
}

func run(ctx context.Context, output string) (err error) {
	inst, err := pgtest.Start(ctx, pgtest.Options{})
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, inst.Stop()) }()
	dsn, err := emptyDatabase(ctx, inst.DSN())
	if err != nil {
		return err
	}
	s, err := postgres.Open(ctx, dsn, postgres.Options{})
	if err != nil {
		return err
	}
	err = s.Migrate(ctx)
	s.Close()
	if err != nil {
		return err
	}
	dump, err := schema.DumpSchema(ctx, dsn)
	if err != nil {
		return err
	}
	return os.WriteFile(output, dump, 0o644)
}

// emptyDatabase creates the database registry on the server of serverDSN
// (a URL) and returns its DSN.
func emptyDatabase(ctx context.Context, serverDSN string) (string, error) {
	conn, err := pgx.Connect(ctx, serverDSN)
	if err != nil {
		return "", err
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE registry"); err != nil {
		return "", err
	}
	u, err := url.Parse(serverDSN)
	if err != nil {
		return "", err
	}
	u.Path = "/registry"
	return u.String(), nil
}
