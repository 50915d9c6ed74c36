package postgres_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/example/platform-apiserver/pkg/registry/postgres"
	"github.com/example/platform-apiserver/pkg/registry/store"
)

func TestReady(t *testing.T) {
	t.Parallel()
	s, b := setupUnmigrated(t, postgres.Options{})
	err := s.Ready(b.ctx)
	if !errors.Is(err, store.ErrUnavailable) || !strings.Contains(err.Error(), "28 migrations pending (001_registry, 002_change_feed, 003_metrics_prune_index, 004_metrics_partitions, 005_member_identity, 006_member_ownership, 007_registry_epoch, 008_unschedulable_reason, 009_cluster_capacity, 010_usage_rollups, 011_namespace_usage, 012_namespace_usage_history, 013_member_last_change, 014_member_removal, 015_other_resources, 016_devices, 017_usage_heartbeat, 018_placement_room_index, 019_change_images, 020_usage_rollup_updates, 021_change_states_once, 022_change_deltas, 023_commit_tickets, 024_change_deltas_by_column, 025_capacity_sums_plans_kept, 026_ticket_waits_in_flight, 027_member_complete_as_of, 028_write_protocol); run `platform-apiserver migrate`") {
		t.Fatalf("Ready before Migrate: %v", err)
	}
	pending, err := s.PendingMigrations(b.ctx)
	if err != nil || len(pending) != 28 {
		t.Fatalf("PendingMigrations: %v, %v", pending, err)
	}
	if _, err := s.NodeCapacities().List(b.ctx, store.ListOptions{}); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("list before Migrate: got %v, want ErrUnavailable", err)
	}
	if err := s.Migrate(b.ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.Ready(b.ctx); err != nil {
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
