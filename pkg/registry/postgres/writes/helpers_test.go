package writes_test

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
	setup          = registrytest.Setup
	mustApply      = registrytest.MustApply
	getNode        = registrytest.GetNode
	getNamespace   = registrytest.GetNamespace
	mustCapacity   = registrytest.MustCapacity
	listNodes      = registrytest.ListNodes
	registryRV     = registrytest.RegistryRV
	removeMember   = registrytest.RemoveMember
	relist         = registrytest.Relist
	nodeKeys       = registrytest.NodeKeys
	namespaceKeys  = registrytest.NamespaceKeys
	reportEvery    = registrytest.ReportEvery
	poll           = registrytest.Poll
	countRows      = registrytest.CountRows
	queryRow       = registrytest.QueryRow
	queryExec      = registrytest.QueryExec
	changeKey      = registrytest.ChangeKey
	sameSet        = registrytest.SameSet
	policy         = registrytest.Policy
	nodeNameN      = registrytest.NodeNameN
	commitsInParts = registrytest.CommitsInParts

	node      = pgtesting.Node
	namespace = pgtesting.Namespace
	pod       = pgtesting.Pod
	slice     = pgtesting.ResourceSlice
	claim     = pgtesting.Claim
)

const (
	gpuDriver, gpuClass = pgtesting.GPUDriver, pgtesting.GPUClass
	gib                 = registrytest.Gib
	metricsNodeCPU      = registrytest.MetricsNodeCPU
	metricsNodeMem      = registrytest.MetricsNodeMem
)
