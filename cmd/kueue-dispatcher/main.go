// Command platform-kueue-dispatcher is an external dispatcher for Kueue's
// MultiKueue: it nominates, for each Workload waiting for the MultiKueue
// admission check, the worker cluster where a PlacementReport says its pod
// sets fit (docs/dispatcher.md).
package main

import (
	"os"

	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/component-base/cli"

	"github.com/example/platform-apiserver/cmd/kueue-dispatcher/app"
)

func main() {
	ctx := genericapiserver.SetupSignalContext()
	os.Exit(cli.Run(app.NewCommand(ctx)))
}
