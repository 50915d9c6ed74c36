package app

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/klog/v2"

	"github.com/example/platform-apiserver/cmd/apiserver/app/options"
	"github.com/example/platform-apiserver/pkg/registry/postgres"
)

func newMigrateCommand(ctx context.Context) *cobra.Command {
	o := options.NewPostgresOptions()
	cmd := &cobra.Command{
		Use:   "migrate",
		Short: "Apply pending registry database migrations and exit",
		Long: `Apply the registry schema migrations embedded in this binary to the database and
exit. The server also applies them at start-up; run this ahead of a rollout to keep
start-up short, or to check that the database is reachable.`,
		Args:         cobra.NoArgs,
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if errs := o.Validate(); len(errs) > 0 {
				return utilerrors.NewAggregate(errs)
			}
			reg, err := postgres.Open(cmd.Context(), o.DSN, o.StoreOptions())
			if err != nil {
				return fmt.Errorf("opening the registry database: %w", err)
			}
			defer reg.Close()
			if err := reg.Migrate(cmd.Context()); err != nil {
				return fmt.Errorf("migrating the registry database: %w", err)
			}
			klog.InfoS("Registry migrations applied")
			return nil
		},
	}
	cmd.SetContext(ctx)
	o.AddFlags(cmd.Flags())
	return cmd
}
