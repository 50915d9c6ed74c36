package plugin

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/example/platform-apiserver/pkg/apis/platform/v1alpha1"
	"github.com/example/platform-apiserver/pkg/generated/clientset/versioned"
	"github.com/example/platform-apiserver/pkg/units"
)

const usageExample = `  # A member's nodes over the last day, hour by hour
  kubectl platform usage prod-1

  # One node over a week, day by day
  kubectl platform usage prod-1 --node worker-7 --window 168h --step 24h

  # The nodes of a pool
  kubectl platform usage prod-1 -l pool=gpu

  # A namespace (a LocalUsageReport: what a RoleBinding of view in team-a allows)
  kubectl platform usage prod-1 -n team-a`

// usageOptions is `kubectl platform usage`: one UsageReport (or, for a
// namespace, a LocalUsageReport) with a step, drawn next to the requests
// and allocatable of what it is about.
type usageOptions struct {
	configFlags *genericclioptions.ConfigFlags
	genericiooptions.IOStreams

	cluster  string
	node     string
	selector string
	// namespace is set when -n was given: the report is then that
	// namespace's LocalUsageReport.
	namespace    string
	window, step time.Duration

	client versioned.Interface
	now    func() time.Time
}

func newUsageCommand(flags *genericclioptions.ConfigFlags, streams genericiooptions.IOStreams) *cobra.Command {
	o := &usageOptions{configFlags: flags, IOStreams: streams, window: 24 * time.Hour, step: time.Hour, now: time.Now}
	cmd := &cobra.Command{
		Use:   "usage CLUSTER [--node NODE | -l SELECTOR | -n NAMESPACE] [--window 24h] [--step 1h]",
		Short: "Usage over time of a member, a node, a pool or a namespace, next to its requests",
		Long: `Usage asks a UsageReport with a step (for a namespace given with -n, a LocalUsageReport)
and prints the average, p95 and max of CPU and memory over the window, next to the
requests and allocatable read from the ClusterCapacity, NodeCapacity or ClusterNamespace,
and the average of each step as a sparkline (oldest first; · marks a step without samples).
For a member or a label selection the figures are per node.`,
		Example: usageExample,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.complete(cmd, args); err != nil {
				return err
			}
			return o.run(cmd.Context())
		},
	}
	cmd.Flags().StringVar(&o.node, "node", "", "one node of the member (its name in the member)")
	cmd.Flags().StringVarP(&o.selector, "selector", "l", "", "the member's nodes whose labels match this selector (e.g. pool=gpu)")
	cmd.Flags().DurationVar(&o.window, "window", o.window, "how far back, at most the server's --metrics-retention")
	cmd.Flags().DurationVar(&o.step, "step", o.step, "the length of each point of the sparkline, whole hours")
	return cmd
}

// complete reads the arguments and builds the client; what is wrong with
// them is said before anything is asked.
func (o *usageOptions) complete(cmd *cobra.Command, args []string) error {
	if len(args) != 1 {
		return fmt.Errorf("name one member cluster (its ClusterCapacity's name), e.g. kubectl platform usage prod-1; got %d arguments", len(args))
	}
	o.cluster = args[0]
	if cmd.Flags().Changed("namespace") {
		o.namespace = *o.configFlags.Namespace
	}
	switch {
	case o.node != "" && o.selector != "":
		return errors.New("--node and --selector both given: ask one node or the nodes a selector matches")
	case o.namespace != "" && (o.node != "" || o.selector != ""):
		return errors.New("-n asks a namespace's usage: give no --node or --selector with it")
	}
	var err error
	o.client, err = clientFor(o.configFlags, o.client)
	return err
}

func (o *usageOptions) run(ctx context.Context) error {
	spec := v1alpha1.UsageReportSpec{Cluster: o.cluster, NodeName: o.node, NodeSelector: o.selector,
		Window: metav1.Duration{Duration: o.window}, Step: &metav1.Duration{Duration: o.step}}
	asked := o.now()
	var status v1alpha1.UsageReportStatus
	if o.namespace != "" {
		r, err := o.client.PlatformV1alpha1().LocalUsageReports(o.namespace).Create(ctx, &v1alpha1.LocalUsageReport{Spec: spec}, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		status = r.Status
	} else {
		r, err := o.client.PlatformV1alpha1().UsageReports().Create(ctx, &v1alpha1.UsageReport{Spec: spec}, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		status = r.Status
	}
	ref, err := o.reference(ctx)
	if err != nil {
		// The usage is answered; say why the requests are missing.
		fmt.Fprintf(o.ErrOut, "Warning: cannot read the requests: %v\n", err)
	}
	return render(o.Out, usageView{subject: o.subject(), perNode: o.namespace == "" && o.node == "", ref: ref,
		status: status, slots: slots(asked, o.window, o.step), step: o.step})
}

// subject names what the report is about.
func (o *usageOptions) subject() string {
	switch {
	case o.namespace != "":
		return fmt.Sprintf("namespace %s in %s", o.namespace, o.cluster)
	case o.node != "":
		return fmt.Sprintf("node %s of %s", o.node, o.cluster)
	case o.selector != "":
		return fmt.Sprintf("nodes %s of %s", o.selector, o.cluster)
	}
	return "member " + o.cluster
}

// reference reads the requests and allocatable (per node for a member or
// a selection) of what the report is about.
func (o *usageOptions) reference(ctx context.Context) (reference, error) {
	api := o.client.PlatformV1alpha1()
	switch {
	case o.namespace != "":
		ns, err := api.ClusterNamespaces(o.namespace).Get(ctx, o.cluster, metav1.GetOptions{})
		if err != nil {
			return reference{}, err
		}
		return reference{cpu: pair{requested: &ns.Status.Requests.CPU}, memory: pair{requested: &ns.Status.Requests.Memory}}, nil
	case o.node != "":
		n, err := api.NodeCapacities().Get(ctx, o.cluster+"."+o.node, metav1.GetOptions{})
		if err != nil {
			return reference{}, err
		}
		return perNode(n.Status.Requested, n.Status.Allocatable, 1), nil
	case o.selector != "":
		var requested, allocatable v1alpha1.NodeResources
		var nodes int64
		opts := metav1.ListOptions{LabelSelector: o.selector, FieldSelector: "status.cluster=" + o.cluster, Limit: 500}
		for {
			list, err := api.NodeCapacities().List(ctx, opts)
			if err != nil {
				return reference{}, err
			}
			for _, n := range list.Items {
				requested.CPU.Add(n.Status.Requested.CPU)
				requested.Memory.Add(n.Status.Requested.Memory)
				allocatable.CPU.Add(n.Status.Allocatable.CPU)
				allocatable.Memory.Add(n.Status.Allocatable.Memory)
			}
			nodes += int64(len(list.Items))
			if opts.Continue = list.Continue; opts.Continue == "" {
				break
			}
		}
		return perNode(requested, allocatable, nodes), nil
	}
	cc, err := api.ClusterCapacities().Get(ctx, o.cluster, metav1.GetOptions{})
	if err != nil {
		return reference{}, err
	}
	return perNode(cc.Status.All.Requested, cc.Status.All.Allocatable, cc.Status.Nodes.Total), nil
}

// perNode is the requests and allocatable of nodes nodes per node, in
// kubectl top's units; unknown without nodes.
func perNode(requested, allocatable v1alpha1.NodeResources, nodes int64) reference {
	if nodes == 0 {
		return reference{}
	}
	cpu := func(q resource.Quantity) *resource.Quantity {
		return new(units.CPU(q.ScaledValue(resource.Nano) / nodes))
	}
	mem := func(q resource.Quantity) *resource.Quantity { return new(units.Memory(q.Value() / nodes)) }
	return reference{cpu: pair{requested: cpu(requested.CPU), allocatable: cpu(allocatable.CPU)},
		memory: pair{requested: mem(requested.Memory), allocatable: mem(allocatable.Memory)}}
}
