// Package app is platform-apiserver's command: flags, the serve path and the
// migrate subcommand.
package app

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	cliflag "k8s.io/component-base/cli/flag"
	"k8s.io/component-base/cli/globalflag"
	"k8s.io/component-base/term"

	"github.com/example/platform-apiserver/cmd/apiserver/app/options"
)

// NewCommand returns the platform-apiserver command.
func NewCommand(ctx context.Context) *cobra.Command {
	o := options.NewOptions()
	cmd := &cobra.Command{
		Use:   "platform-apiserver",
		Short: "Serve platform.example.io, the platform's live view of its clusters, through kube-apiserver",
		Long: `platform-apiserver is a Kubernetes aggregated API server. kube-apiserver proxies the
group platform.example.io/v1alpha1 to it through an APIService, and it answers get and
list for NodeCapacity (per node: capacity, requests, usage, schedulability) and
ClusterNamespace (per namespace and cluster: pods, requests, quotas) from the PostgreSQL
registry that discovery keeps fresh. Writes are not served.

It applies pending registry migrations at start-up, authenticates callers through
kube-apiserver (front-proxy client certificates and TokenReview) and authorizes them
with SubjectAccessReview.

Example (in a cluster, see artifacts/):
  platform-apiserver --postgres-dsn=postgres://platform@db:5432/platform \
    --tls-cert-file=/certs/tls.crt --tls-private-key-file=/certs/tls.key`,
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if errs := o.Validate(); len(errs) > 0 {
				return utilerrors.NewAggregate(errs)
			}
			return run(cmd.Context(), o)
		},
		Args: cobra.NoArgs,
	}
	cmd.CompletionOptions.DisableDefaultCmd = true
	cmd.SetContext(ctx)

	fss := o.Flags()
	globalflag.AddGlobalFlags(fss.FlagSet("global"), cmd.Name())
	for _, fs := range fss.FlagSets {
		cmd.Flags().AddFlagSet(fs)
	}
	setUsage(cmd, fss)

	cmd.AddCommand(newMigrateCommand(ctx))
	return cmd
}

func run(ctx context.Context, o *options.Options) error {
	config, err := o.Config(ctx)
	if err != nil {
		return err
	}
	server, err := config.Complete().New(ctx)
	if err != nil {
		return err
	}
	return server.Run(ctx)
}

func setUsage(cmd *cobra.Command, fss cliflag.NamedFlagSets) {
	cols, _, _ := term.TerminalSize(cmd.OutOrStdout())
	cmd.SetUsageFunc(func(c *cobra.Command) error {
		fmt.Fprintf(c.OutOrStderr(), "Usage:\n  %s\n", c.UseLine())
		if c.HasAvailableSubCommands() {
			fmt.Fprintf(c.OutOrStderr(), "\nCommands:\n")
			for _, sub := range c.Commands() {
				if sub.IsAvailableCommand() {
					fmt.Fprintf(c.OutOrStderr(), "  %-10s %s\n", sub.Name(), sub.Short)
				}
			}
		}
		cliflag.PrintSections(c.OutOrStderr(), fss, cols)
		return nil
	})
	cmd.SetHelpFunc(func(c *cobra.Command, _ []string) {
		fmt.Fprintf(c.OutOrStdout(), "%s\n\nUsage:\n  %s\n", c.Long, c.UseLine())
		if c.HasAvailableSubCommands() {
			fmt.Fprintf(c.OutOrStdout(), "\nCommands:\n")
			for _, sub := range c.Commands() {
				if sub.IsAvailableCommand() {
					fmt.Fprintf(c.OutOrStdout(), "  %-10s %s\n", sub.Name(), sub.Short)
				}
			}
		}
		cliflag.PrintSections(c.OutOrStdout(), fss, cols)
	})
}
