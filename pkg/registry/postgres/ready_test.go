package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/example/platform-apiserver/pkg/registry/postgres"
	"github.com/example/platform-apiserver/pkg/registry/postgres/schema"
	"github.com/example/platform-apiserver/pkg/registry/store"
)

func TestReady(t *testing.T) {
	t.Parallel()
	s, b := setupUnmigrated(t, postgres.Options{})
	latest, err := schema.LatestVersion()
	if err != nil {
		t.Fatal(err)
	}
	pending, err := s.PendingMigrations(b.Ctx)
	if err != nil || len(pending) != latest || pending[0] != "001_registry" {
		t.Fatalf("PendingMigrations: %v, %v; want all %d", pending, err, latest)
	}
	err = s.Ready(b.Ctx)
	if want := fmt.Sprintf("%d migrations pending (%s); run `platform-apiserver migrate`", latest, strings.Join(pending, ", ")); !errors.Is(err, store.ErrUnavailable) || !strings.Contains(err.Error(), want) {
		t.Fatalf("Ready before Migrate: %v, want ErrUnavailable saying %q", err, want)
	}
	if _, err := s.NodeCapacities().List(b.Ctx, store.ListOptions{}); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("list before Migrate: got %v, want ErrUnavailable", err)
	}
	if err := s.Migrate(b.Ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.Ready(b.Ctx); err != nil {
		t.Fatalf("Ready after Migrate: %v", err)
	}
}

func TestUnreachable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// Port 1 on loopback: nothing listens there.
	s, err := postgres.Open(ctx, "postgres://postgres@127.0.0.1:1/postgres?sslmode=disable&connect_timeout=2", postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Ready(ctx); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("Ready: got %v, want ErrUnavailable", err)
	}
	if _, err := s.GetNodeCapacity(ctx, "c", "n"); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("Get: got %v, want ErrUnavailable", err)
	}
	if err := s.Apply(ctx, store.Batch{ClusterID: "c"}); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("Apply: got %v, want ErrUnavailable", err)
	}
}
