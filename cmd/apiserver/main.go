// Command platform-apiserver serves the platform.example.io API group, the
// platform's view of its member clusters, as a Kubernetes aggregated API
// server backed by the PostgreSQL registry.
package main

import (
	"os"

	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/component-base/cli"

	"github.com/example/platform-apiserver/cmd/apiserver/app"
)

func main() {
	ctx := genericapiserver.SetupSignalContext()
	os.Exit(cli.Run(app.NewCommand(ctx)))
}
