// Package plugin is kubectl-platform, the kubectl plugin that draws the
// platform.example.io API's answers for people. It reads through the
// aggregator with the user's kubeconfig, as kubectl does, so it sees what
// RBAC lets the user see and nothing else.
package plugin

import (
	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
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
