package usage_test

import (
	"github.com/example/platform-apiserver/pkg/registry/postgres/internal/pgtesting"
	"github.com/example/platform-apiserver/pkg/registry/postgres/internal/registrytest"
)

// The whole registry's test helpers (registrytest) and records (pgtesting).
var (
	setup           = registrytest.Setup
	setupUnmigrated = registrytest.SetupUnmigrated
	mustApply       = registrytest.MustApply
	getNode         = registrytest.GetNode
	getNamespace    = registrytest.GetNamespace
	listNodes       = registrytest.ListNodes
	registryRV      = registrytest.RegistryRV
	countRows       = registrytest.CountRows
	queryRow        = registrytest.QueryRow
	queryExec       = registrytest.QueryExec
	policy          = registrytest.Policy
	nodeNameN       = registrytest.NodeNameN
	commitsInParts  = registrytest.CommitsInParts

	node = pgtesting.Node
)

const (
	gib            = registrytest.Gib
	metricsNodeCPU = registrytest.MetricsNodeCPU
	metricsNodeMem = registrytest.MetricsNodeMem
)
