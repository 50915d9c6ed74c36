package app

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/klog/v2"

	"github.com/example/platform-apiserver/cmd/apiserver/app/options"
	"github.com/example/platform-apiserver/pkg/registry/postgres"
	"github.com/example/platform-apiserver/pkg/registry/postgres/schema"
)

func newMigrateCommand(ctx context.Context) *cobra.Command {
	o := options.NewPostgresOptions()
	cmd := &cobra.Command{
		Use:   "migrate",
		Short: "Apply pending registry database migrations and exit (status: list them)",
		Long: `Apply the registry schema migrations embedded in this binary to the database and
exit. The server also applies them at start-up; run this ahead of a rollout (as a Job
or an init container of the new image) to keep start-up short, or to check that the
database is reachable. Replicas that migrate at once take turns (an advisory lock).

"migrate status" lists every migration, applied (with when) or pending, and changes
nothing. "migrate down --to N" reverts every applied migration newer than N (a rollback
to the release whose newest migration is N; docs/upgrades.md).`,
		Args:         cobra.NoArgs,
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			reg, err := openRegistry(cmd.Context(), o)
			if err != nil {
				return err
			}
			defer reg.Close()
			if err := reg.Migrate(cmd.Context()); err != nil {
				return fmt.Errorf("migrating the registry database: %w", err)
			}
			klog.FromContext(cmd.Context()).Info("Registry migrations applied")
			return nil
		},
	}
	cmd.SetContext(ctx)
	o.AddFlags(cmd.PersistentFlags())
	cmd.AddCommand(newMigrateStatusCommand(ctx, o), newMigrateDownCommand(ctx, o))
	// Only the registry flags apply here, not the server's sections.
	help := func(c *cobra.Command) {
		out := c.OutOrStdout()
		fmt.Fprintf(out, "%s\n\nUsage:\n  %s\n", c.Long, c.UseLine())
		if c.HasAvailableSubCommands() {
			fmt.Fprintf(out, "\nCommands:\n")
			for _, sub := range c.Commands() {
				if sub.IsAvailableCommand() {
					fmt.Fprintf(out, "  %-10s %s\n", sub.Name(), sub.Short)
				}
			}
		}
		fmt.Fprintf(out, "\nFlags:\n%s", c.Flags().FlagUsages())
	}
	for _, c := range append([]*cobra.Command{cmd}, cmd.Commands()...) {
		c.SetHelpFunc(func(c *cobra.Command, _ []string) { help(c) })
		c.SetUsageFunc(func(c *cobra.Command) error { help(c); return nil })
	}
	return cmd
}

func newMigrateStatusCommand(ctx context.Context, o *options.PostgresOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "status",
		Short: "List applied and pending registry migrations",
		Long: `List the registry migrations by version: those applied to the database (and when),
those pending (embedded in this binary, not applied yet), and any applied by a newer
binary that this one does not know. It changes nothing; the exit status is 0 whenever
the database answered.`,
		Args:         cobra.NoArgs,
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			reg, err := openRegistry(cmd.Context(), o)
			if err != nil {
				return err
			}
			defer reg.Close()
			states, err := reg.MigrationStatus(cmd.Context())
			if err != nil {
				return fmt.Errorf("reading the registry's migration status: %w", err)
			}
			return printMigrationStatus(cmd.OutOrStdout(), states)
		},
	}
	cmd.SetContext(ctx)
	return cmd
}

func newMigrateDownCommand(ctx context.Context, o *options.PostgresOptions) *cobra.Command {
	to := -1
	cmd := &cobra.Command{
		Use:   "down --to VERSION",
		Short: "Revert the registry migrations newer than a version",
		Long: `Revert, newest first, every registry migration applied to the database that is newer
than --to, with the down migrations embedded in this binary: a rollback to the release
whose newest migration is VERSION ("migrate status" lists them). Run it with the newer
release's binary, before the older release's replicas start (docs/upgrades.md). A
migration applied by a binary newer than this one cannot be reverted by it.`,
		Args:         cobra.NoArgs,
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if to < 0 {
				return fmt.Errorf("--to is required: the version to go back to (0 reverts every migration); \"migrate status\" lists them")
			}
			reg, err := openRegistry(cmd.Context(), o)
			if err != nil {
				return err
			}
			defer reg.Close()
			if err := reg.MigrateDownTo(cmd.Context(), to); err != nil {
				return fmt.Errorf("reverting the registry's migrations newer than %d: %w", to, err)
			}
			klog.FromContext(cmd.Context()).Info("Registry migrations reverted", "to", to)
			return nil
		},
	}
	cmd.Flags().IntVar(&to, "to", to, "The migration version to go back to: every applied migration newer than it is reverted.")
	cmd.SetContext(ctx)
	return cmd
}

func openRegistry(ctx context.Context, o *options.PostgresOptions) (*postgres.Store, error) {
	if errs := o.Validate(); len(errs) > 0 {
		return nil, utilerrors.NewAggregate(errs)
	}
	reg, err := postgres.Open(ctx, o.DSN, o.StoreOptions())
	if err != nil {
		return nil, fmt.Errorf("opening the registry database: %w", err)
	}
	return reg, nil
}

// printMigrationStatus writes one line per migration and a summary:
//
//	VERSION  MIGRATION          STATUS   APPLIED AT
//	1        001_registry       applied  2026-12-01T10:00:00Z
//	7        007_something      pending
//	2 applied, 1 pending
func printMigrationStatus(w io.Writer, states []schema.MigrationState) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "VERSION\tMIGRATION\tSTATUS\tAPPLIED AT")
	var applied, pending, unknown int
	for _, s := range states {
		status, at := "pending", ""
		switch {
		case s.Applied && !s.Known:
			status, at = "applied (unknown to this binary: applied by a newer one)", s.AppliedAt.UTC().Format(time.RFC3339)
			applied++
			unknown++
		case s.Applied:
			status, at = "applied", s.AppliedAt.UTC().Format(time.RFC3339)
			applied++
		default:
			pending++
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\n", s.Version, s.Name, status, at)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	summary := fmt.Sprintf("%d applied, %d pending", applied, pending)
	if unknown > 0 {
		summary += fmt.Sprintf(", %d unknown to this binary (the database is newer than it)", unknown)
	}
	_, err := fmt.Fprintln(w, summary)
	return err
}
