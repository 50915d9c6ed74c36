// Command apiserver is platform-apiserver serving Gadget (package gadget)
// beside the built-in kinds, as a build with a kind of its own would.
package main

import (
	"fmt"
	"os"

	"k8s.io/apiserver/pkg/registry/rest"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/component-base/cli"

	"github.com/example/platform-apiserver/cmd/apiserver/app"
	"github.com/example/platform-apiserver/pkg/apiserver"
	"github.com/example/platform-apiserver/pkg/registry"
	"github.com/example/platform-apiserver/pkg/registry/postgres"
	"github.com/example/platform-apiserver/test/kinds/gadget"
)

func main() {
	err := apiserver.Extend(apiserver.Extension{
		Kinds: []apiserver.Kind{{Declaration: gadget.Kind.Declaration(), View: gadget.View.Logged(),
			Storage: func(s *postgres.Store, c apiserver.KindConfig) rest.Storage {
				return registry.NewREST[gadget.Record, gadget.Gadget, *gadget.Gadget](gadget.Kind, postgres.Source(s, gadget.View), c.Watch)
			}}},
		AddToScheme: gadget.AddToScheme, OpenAPI: gadget.OpenAPI, Migrations: gadget.Migrations,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(cli.Run(app.NewCommand(genericapiserver.SetupSignalContext())))
}
