// Package plugin is kubectl-platform, the kubectl plugin that draws the
// platform.example.io API's answers for people. It reads through the
// aggregator with the user's kubeconfig, as kubectl does, so it sees what
// RBAC lets the user see and nothing else.
package plugin

import (
	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/example/platform-apiserver/pkg/generated/clientset/versioned"
)

// NewCommand is `kubectl platform` with its subcommands.
func NewCommand(streams genericiooptions.IOStreams) *cobra.Command {
	flags := genericclioptions.NewConfigFlags(true)
	cmd := &cobra.Command{
		Use:   "kubectl-platform",
		Short: "Read platform.example.io answers as people read them",
		Long: `kubectl platform reads the platform.example.io API (ClusterCapacity, NodeCapacity,
ClusterNamespace, UsageReport) with your kubeconfig and prints what kubectl get and
kubectl create -o yaml cannot: usage over time next to requests, and right-sized
requests from it.`,
		Annotations:   map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl platform"},
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	flags.AddFlags(cmd.PersistentFlags())
	cmd.AddCommand(newUsageCommand(flags, streams), newRecommendCommand(flags, streams))
	return cmd
}

// clientFor is client if set (a test's), else the platform clientset of
// the user's kubeconfig and flags.
func clientFor(flags *genericclioptions.ConfigFlags, client versioned.Interface) (versioned.Interface, error) {
	if client != nil {
		return client, nil
	}
	config, err := flags.ToRESTConfig()
	if err != nil {
		return nil, err
	}
	return versioned.NewForConfig(config)
}
