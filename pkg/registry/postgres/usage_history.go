package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/example/platform-apiserver/pkg/registry/postgres/pgdb"
	"github.com/example/platform-apiserver/pkg/registry/postgres/usage"
	"github.com/example/platform-apiserver/pkg/registry/postgres/views"
	"github.com/example/platform-apiserver/pkg/registry/store"
)

// UsageHistory summarizes the usage samples q selects from the hourly
// rollups (usage.History). It reads any server (a standby too): the
// history has no resourceVersion.
func (s *Store) UsageHistory(ctx context.Context, q store.UsageQuery) (*store.UsageHistory, error) {
	readTx := func(ctx context.Context, fn func(pgx.Tx) error) error { return s.readTx(ctx, store.Freshness{}, fn) }
	nodes := func(args *pgdb.Args, reqs labels.Requirements) ([]string, error) {
		return views.SelectorSQL(args, reqs, nil)
	}
	return usage.History(ctx, readTx, nodes, q)
}
