package postgres_test

import (
	"os"
	"testing"

	"github.com/example/platform-apiserver/pkg/registry/postgres/internal/pgtesting"
	"github.com/example/platform-apiserver/pkg/registry/postgres/internal/registrytest"
	pgtest "github.com/example/platform-apiserver/test/framework/postgres"
)

func TestMain(m *testing.M) { os.Exit(pgtest.RunTests(m)) }

// The whole registry's test helpers (registrytest) and records (pgtesting).
type testBundle = registrytest.Bundle

var (
	setup           = registrytest.Setup
	setupUnmigrated = registrytest.SetupUnmigrated
	mustApply       = registrytest.MustApply
	getNode         = registrytest.GetNode
	mustCapacity    = registrytest.MustCapacity
	listNodes       = registrytest.ListNodes
	registryRV      = registrytest.RegistryRV
	removeMember    = registrytest.RemoveMember
	nodeKeys        = registrytest.NodeKeys
	reportEvery     = registrytest.ReportEvery
	withLabel       = registrytest.WithLabel
	asNode          = registrytest.AsNode
	asNamespace     = registrytest.AsNamespace
	asCapacity      = registrytest.AsCapacity
	policy          = registrytest.Policy

	node      = pgtesting.Node
	namespace = pgtesting.Namespace
	pod       = pgtesting.Pod
)

const (
	metricsNodeCPU = registrytest.MetricsNodeCPU
	metricsNodeMem = registrytest.MetricsNodeMem
)
