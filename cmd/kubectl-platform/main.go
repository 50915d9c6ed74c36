// Command kubectl-platform is the kubectl plugin for platform.example.io:
// installed on the PATH, kubectl runs it as `kubectl platform`. It draws
// what the API answers for people, e.g. a member's, a node's or a
// namespace's usage over time as a sparkline next to its requests
// (`kubectl platform usage`).
package main

import (
	"fmt"
	"os"

	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/component-base/cli"

	"github.com/example/platform-apiserver/pkg/plugin"
)

func main() {
	// As kubectl: the error on stderr, exit 1.
	if err := cli.RunNoErrOutput(plugin.NewCommand(genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr})); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}
