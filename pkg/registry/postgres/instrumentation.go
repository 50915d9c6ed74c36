package postgres

import (
	"sync"

	"k8s.io/component-base/metrics/legacyregistry"

	"github.com/example/platform-apiserver/pkg/registry/postgres/pgdb"
	"github.com/example/platform-apiserver/pkg/registry/postgres/replicas"
	"github.com/example/platform-apiserver/pkg/registry/postgres/writes"
)

var registerOnce sync.Once

// RegisterMetrics registers the registry's metrics, and those of its
// connection pool, with the legacy registry the server's /metrics serves.
// Call it once per process, for the store the server uses.
func (s *Store) RegisterMetrics() {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(writes.Metrics()...)
		legacyregistry.MustRegister(replicas.Metrics()...)
		legacyregistry.CustomMustRegister(pgdb.NewPoolCollector(s.pools))
	})
}

// pools are the store's pools, the primary's and the standbys', for their
// metrics.
func (s *Store) pools() []*pgdb.Pool {
	return append(s.primaryPools(), s.replicas.Pools()...)
}
