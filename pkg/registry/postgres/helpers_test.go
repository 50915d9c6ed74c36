package postgres_test

import (
	"strings"
	"time"

	"github.com/example/platform-apiserver/pkg/registry/store"
)

func nodeKeys(items []store.NodeCapacity) string {
	keys := make([]string, len(items))
	for i, n := range items {
		keys[i] = n.ClusterID + "." + n.Node.Name
	}
	return strings.Join(keys, ",")
}

func namespaceKeys(items []store.ClusterNamespace) string {
	keys := make([]string, len(items))
	for i, n := range items {
		keys[i] = n.Namespace.Name + "/" + n.ClusterID
	}
	return strings.Join(keys, ",")
}

// reportEvery reports every newer sample, as usage was before reporting.
var reportEvery = store.UsageReporting{Threshold: 0, Period: time.Nanosecond}
