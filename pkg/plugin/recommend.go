package plugin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/cli-runtime/pkg/printers"

	"github.com/example/platform-apiserver/pkg/apis/platform/v1alpha1"
	"github.com/example/platform-apiserver/pkg/generated/clientset/versioned"
)

const recommendExample = `  # team-a's requests in prod-1, sized from its last week (or all the history kept)
  kubectl platform recommend prod-1 -n team-a

  # From the last three days, for the 99th percentile without headroom
  kubectl platform recommend prod-1 -n team-a --window 72h --percentile 99 --headroom 0`

// recommendOptions is kubectl platform recommend: a LocalUsageReport with
// spec.recommend, printed as a table.
type recommendOptions struct {
	configFlags *genericclioptions.ConfigFlags
	genericiooptions.IOStreams

	cluster, namespace string
	window             time.Duration
	percentile         int32
	headroom           int32

	client versioned.Interface
}

func newRecommendCommand(flags *genericclioptions.ConfigFlags, streams genericiooptions.IOStreams) *cobra.Command {
	o := &recommendOptions{configFlags: flags, IOStreams: streams, percentile: 95, headroom: 15}
	cmd := &cobra.Command{
		Use:   "recommend CLUSTER -n NAMESPACE [--window 168h] [--percentile 95] [--headroom 15]",
		Short: "Right-sized CPU and memory requests and quota for a namespace, from its usage history",
		Long: `Recommend asks a LocalUsageReport with spec.recommend in the namespace (what a
RoleBinding of view there allows) and prints, for CPU and memory, the namespace's
requests now, the requests its usage asks for (the percentile of its samples over the
window plus the headroom), what right-sizing frees, the share of the window's samples
the recommendation covers, and its quota now next to the recommended one (the
window's maximum usage plus the headroom). The figures are for the namespace as a
whole: usage is recorded per namespace, not per workload.`,
		Example: recommendExample,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.complete(cmd, args); err != nil {
				return err
			}
			return o.run(cmd.Context())
		},
	}
	cmd.Flags().DurationVar(&o.window, "window", 0, "how far back; unset: a week, or all the history the server keeps if less")
	cmd.Flags().Int32Var(&o.percentile, "percentile", o.percentile, "the percentile of the samples the requests are sized for, 50–100")
	cmd.Flags().Int32Var(&o.headroom, "headroom", o.headroom, "percent added on top of the percentile (and of the maximum, for the quota), 0–100")
	return cmd
}

// complete reads the arguments and builds the client.
func (o *recommendOptions) complete(cmd *cobra.Command, args []string) error {
	if len(args) != 1 {
		return fmt.Errorf("name one member cluster, e.g. kubectl platform recommend prod-1 -n team-a; got %d arguments", len(args))
	}
	o.cluster = args[0]
	if !cmd.Flags().Changed("namespace") || *o.configFlags.Namespace == "" {
		return errors.New("name the namespace with -n: requests are recommended for one namespace")
	}
	o.namespace = *o.configFlags.Namespace
	var err error
	o.client, err = clientFor(o.configFlags, o.client)
	return err
}

func (o *recommendOptions) run(ctx context.Context) error {
	r, err := o.client.PlatformV1alpha1().LocalUsageReports(o.namespace).Create(ctx, &v1alpha1.LocalUsageReport{Spec: v1alpha1.UsageReportSpec{
		Cluster: o.cluster, Window: metav1.Duration{Duration: o.window},
		Recommend: &v1alpha1.RecommendOptions{Percentile: o.percentile, HeadroomPercent: &o.headroom}}}, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	return renderRecommendation(o.Out, fmt.Sprintf("namespace %s in %s", o.namespace, o.cluster), r.Status)
}

// renderRecommendation prints a recommendation as a table.
func renderRecommendation(w io.Writer, subject string, st v1alpha1.UsageReportStatus) error {
	rec := st.Recommendation
	if rec == nil || st.From == nil || st.To == nil {
		_, err := fmt.Fprintf(w, "%s: no samples in the window, nothing to recommend\n", subject)
		return err
	}
	fmt.Fprintf(w, "%s: %d samples, %s to %s UTC; requests at p%d + %d%%, quota at max + %d%%\n",
		subject, st.Samples, when(st.From.Time), when(st.To.Time), rec.Percentile, rec.HeadroomPercent, rec.HeadroomPercent)
	tw := printers.GetNewTabWriter(w)
	fmt.Fprintln(tw, "RESOURCE\tREQUESTS NOW\tRECOMMENDED\tFREES\tCOVERED\tQUOTA NOW\tRECOMMENDED QUOTA")
	quotaNow := func(get func(*v1alpha1.RecommendedAmounts) resource.Quantity) string {
		if rec.CurrentQuota == nil {
			return "<none>"
		}
		if q := get(rec.CurrentQuota); !q.IsZero() {
			return q.String()
		}
		return "<none>"
	}
	for _, r := range []struct {
		name    string
		get     func(*v1alpha1.RecommendedAmounts) resource.Quantity
		covered string
	}{
		{"cpu", func(a *v1alpha1.RecommendedAmounts) resource.Quantity { return a.CPU }, rec.Covered.CPU},
		{"memory", func(a *v1alpha1.RecommendedAmounts) resource.Quantity { return a.Memory }, rec.Covered.Memory},
	} {
		now, recommended, frees, quota := r.get(&rec.CurrentRequests), r.get(&rec.Requests), r.get(&rec.Frees), r.get(&rec.Quota)
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.name, now.String(), recommended.String(), frees.String(), r.covered, quotaNow(r.get), quota.String())
	}
	return tw.Flush()
}
