package app

import (
	"fmt"
	"time"

	"github.com/spf13/pflag"
	cliflag "k8s.io/component-base/cli/flag"
	"k8s.io/component-base/logs"
	logsapi "k8s.io/component-base/logs/api/v1"

	"github.com/example/platform-apiserver/pkg/dispatcher"
)

// Options are the dispatcher's flags.
type Options struct {
	Kubeconfig         string
	PlatformKubeconfig string
	BindAddress        string
	WhenNothingFits    string
	MaxDataAge         time.Duration
	RetryInterval      time.Duration
	NominationTimeout  time.Duration
	Settle             time.Duration
	PromiseExpiry      time.Duration
	Workers            int
	QPS                float32
	Burst              int
	Logging            *logs.Options
}

// NewOptions returns the defaults.
func NewOptions() *Options {
	return &Options{
		BindAddress:       "0.0.0.0:8080",
		WhenNothingFits:   string(dispatcher.FallbackWait),
		MaxDataAge:        2 * time.Minute,
		RetryInterval:     10 * time.Second,
		NominationTimeout: 2 * time.Minute,
		Settle:            15 * time.Second,
		PromiseExpiry:     5 * time.Minute,
		Workers:           4,
		QPS:               50,
		Burst:             100,
		Logging:           logs.NewOptions(),
	}
}

// Flags returns the flags by section.
func (o *Options) Flags() cliflag.NamedFlagSets {
	var fss cliflag.NamedFlagSets
	fs := fss.FlagSet("clusters")
	fs.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig, "Kubeconfig of Kueue's manager cluster (its Workloads). Empty: in-cluster configuration.")
	fs.StringVar(&o.PlatformKubeconfig, "platform-kubeconfig", o.PlatformKubeconfig, "Kubeconfig of the cluster whose kube-apiserver serves platform.example.io. Empty: the manager cluster's.")
	fs.Float32Var(&o.QPS, "kube-api-qps", o.QPS, "Queries per second to each API server.")
	fs.IntVar(&o.Burst, "kube-api-burst", o.Burst, "Burst of queries to each API server.")
	o.decisionFlags(fss.FlagSet("decisions"))
	fs = fss.FlagSet("serving")
	fs.StringVar(&o.BindAddress, "bind-address", o.BindAddress, "Address of /metrics, /healthz and /readyz (plain HTTP; empty turns them off).")
	logsapi.AddFlags(o.Logging, fss.FlagSet("logging"))
	return fss
}

func (o *Options) decisionFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.WhenNothingFits, "when-nothing-fits", o.WhenNothingFits, "What to do when no worker fits a Workload now: wait (nominate nobody, ask again after --retry-interval) or most-room (nominate the worker closest to fitting).")
	fs.DurationVar(&o.MaxDataAge, "max-data-age", o.MaxDataAge, "Never nominate a worker whose mirrored data is older than this (PlacementReport's dataAge).")
	fs.DurationVar(&o.RetryInterval, "retry-interval", o.RetryInterval, "How soon a Workload nothing was nominated for is decided again.")
	fs.DurationVar(&o.NominationTimeout, "nomination-timeout", o.NominationTimeout, "How long a nominated worker has to admit a Workload before the next best worker is nominated.")
	fs.DurationVar(&o.Settle, "settle", o.Settle, "How long after a worker admitted a Workload its room is still held as promised (until its pods are mirrored).")
	fs.DurationVar(&o.PromiseExpiry, "promise-expiry", o.PromiseExpiry, "How long the room of a nomination no worker admitted is held.")
	fs.IntVar(&o.Workers, "workers", o.Workers, "Workloads decided at once.")
}

// Validate names every bad flag and what it takes.
func (o *Options) Validate() []error {
	var errs []error
	switch dispatcher.Fallback(o.WhenNothingFits) {
	case dispatcher.FallbackWait, dispatcher.FallbackMostRoom:
	default:
		errs = append(errs, fmt.Errorf("--when-nothing-fits=%q: want wait or most-room", o.WhenNothingFits))
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"max-data-age", o.MaxDataAge}, {"retry-interval", o.RetryInterval}, {"nomination-timeout", o.NominationTimeout}, {"settle", o.Settle}, {"promise-expiry", o.PromiseExpiry}} {
		if d.v <= 0 {
			errs = append(errs, fmt.Errorf("--%s=%s: want a positive duration, such as 30s", d.name, d.v))
		}
	}
	if o.Workers < 1 {
		errs = append(errs, fmt.Errorf("--workers=%d: want at least 1", o.Workers))
	}
	if o.QPS <= 0 || o.Burst < 1 {
		errs = append(errs, fmt.Errorf("--kube-api-qps=%v --kube-api-burst=%d: want both positive", o.QPS, o.Burst))
	}
	if err := logsapi.ValidateAndApply(o.Logging, nil); err != nil {
		errs = append(errs, err)
	}
	return errs
}

// Config is the dispatcher's behaviour from the flags.
func (o *Options) Config() dispatcher.Config {
	return dispatcher.Config{
		Policy:            dispatcher.Policy{MaxDataAge: o.MaxDataAge, WhenNothingFits: dispatcher.Fallback(o.WhenNothingFits)},
		RetryInterval:     o.RetryInterval,
		NominationTimeout: o.NominationTimeout,
		Settle:            o.Settle,
		PromiseExpiry:     o.PromiseExpiry,
		Workers:           o.Workers,
	}
}
