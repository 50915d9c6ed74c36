package options

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	genericapiserver "k8s.io/apiserver/pkg/server"
	flowcontrolapply "k8s.io/client-go/applyconfigurations/flowcontrol/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/example/platform-apiserver/pkg/apiserver"
)

// parseOptions returns the options after parsing args as the command does.
func parseOptions(t *testing.T, args ...string) *Options {
	t.Helper()
	o := NewOptions()
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	for _, set := range o.Flags().FlagSets {
		fs.AddFlagSet(set)
	}
	if err := fs.Parse(args); err != nil {
		t.Fatalf("parse %v: %v", args, err)
	}
	return o
}

// writeKubeconfig writes a kubeconfig of a server nothing contacts here.
func writeKubeconfig(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	const kubeconfig = `apiVersion: v1
kind: Config
clusters: [{name: hosting, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: {cluster: hosting, user: u}}]
current-context: c
`
	if err := os.WriteFile(path, []byte(kubeconfig), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// notInCluster makes rest.InClusterConfig fail as outside a pod.
func notInCluster(t *testing.T) {
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	t.Setenv("KUBERNETES_SERVICE_PORT", "")
}

// TestApplyFeatures checks that --profiling, --contention-profiling,
// --debug-socket-path and --enable-priority-and-fairness reach the generic
// server's configuration, and the seats priority and fairness shares.
func TestApplyFeatures(t *testing.T) {
	notInCluster(t)
	kubeconfig := writeKubeconfig(t)
	socket := filepath.Join(t.TempDir(), "debug.sock")
	tests := []struct {
		name                  string
		args                  []string
		profiling, contention bool
		socket                string
		flowControl           bool
		seats                 int
	}{
		{name: "defaults", args: []string{"--kubeconfig=" + kubeconfig, "--cluster-id=hosting"},
			profiling: true, flowControl: true, seats: 40},
		{name: "profiling off, no priority and fairness", args: []string{"--profiling=false", "--enable-priority-and-fairness=false"},
			seats: 40},
		{name: "contention profiling on the debug socket", args: []string{"--profiling=false", "--contention-profiling",
			"--debug-socket-path=" + socket, "--authorization-kubeconfig=" + kubeconfig},
			contention: true, socket: socket, flowControl: true, seats: 40},
		{name: "seats from the in-flight limits", args: []string{"--authentication-kubeconfig=" + kubeconfig,
			"--max-requests-inflight=7", "--max-mutating-requests-inflight=3"},
			profiling: true, flowControl: true, seats: 10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := parseOptions(t, tt.args...)
			if errs := o.validateFeatures(); len(errs) != 0 {
				t.Fatalf("validate: %v", errs)
			}
			config := genericapiserver.NewRecommendedConfig(apiserver.Codecs)
			if err := o.ServerRun.ApplyTo(&config.Config); err != nil {
				t.Fatal(err)
			}
			if err := o.applyFeatures(t.Context(), config); err != nil {
				t.Fatalf("applyFeatures: %v", err)
			}
			if config.EnableProfiling != tt.profiling || config.EnableContentionProfiling != tt.contention || config.DebugSocketPath != tt.socket {
				t.Errorf("profiling %v, contention profiling %v, debug socket %q; want %v, %v, %q",
					config.EnableProfiling, config.EnableContentionProfiling, config.DebugSocketPath, tt.profiling, tt.contention, tt.socket)
			}
			if (config.FlowControl != nil) != tt.flowControl || (config.SharedInformerFactory != nil) != tt.flowControl {
				t.Errorf("flow control set %v, informers set %v; want both %v",
					config.FlowControl != nil, config.SharedInformerFactory != nil, tt.flowControl)
			}
			if seats := config.MaxRequestsInFlight + config.MaxMutatingRequestsInFlight; seats != tt.seats {
				t.Errorf("seats %d, want %d", seats, tt.seats)
			}
		})
	}
}

// TestFlowControlKubeconfig checks which kubeconfig the FlowSchemas are
// read with, and the error outside a cluster without any.
func TestFlowControlKubeconfig(t *testing.T) {
	notInCluster(t)
	hosting, authz, authn := writeKubeconfig(t), writeKubeconfig(t), writeKubeconfig(t)
	tests := []struct {
		name string
		args []string
		from string // "" for an error
	}{
		{"--kubeconfig first", []string{"--kubeconfig=" + hosting, "--authorization-kubeconfig=" + authz, "--authentication-kubeconfig=" + authn}, "--kubeconfig=" + hosting},
		{"the deprecated --member-kubeconfig", []string{"--member-kubeconfig=" + hosting, "--authorization-kubeconfig=" + authz}, "--kubeconfig=" + hosting},
		{"then delegated authorization's", []string{"--authorization-kubeconfig=" + authz, "--authentication-kubeconfig=" + authn}, "--authorization-kubeconfig=" + authz},
		{"then delegated authentication's", []string{"--authentication-kubeconfig=" + authn}, "--authentication-kubeconfig=" + authn},
		{"none outside a cluster", nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := parseOptions(t, tt.args...)
			_, from, err := o.flowControlConfig()
			if tt.from == "" {
				if err == nil || !strings.Contains(err.Error(), "--enable-priority-and-fairness=false") {
					t.Errorf("err = %v, want one saying how to point it at the hosting cluster or turn it off", err)
				}
				config := genericapiserver.NewRecommendedConfig(apiserver.Codecs)
				if err := o.applyFeatures(t.Context(), config); err == nil {
					t.Error("applyFeatures without a hosting cluster succeeded")
				}
				return
			}
			if err != nil || from != tt.from {
				t.Errorf("from %q, %v; want %q", from, err, tt.from)
			}
		})
	}
}

// TestValidateFeatures checks that settings that would do nothing, or do
// harm, are refused, every one of them.
func TestValidateFeatures(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		want []string // substrings, one per error
	}{
		{"defaults", nil, nil},
		{"contention profiling without profiling", []string{"--profiling=false", "--contention-profiling"},
			[]string{"--contention-profiling needs --profiling or --debug-socket-path"}},
		{"contention profiling on the socket", []string{"--profiling=false", "--contention-profiling", "--debug-socket-path=" + filepath.Join(dir, "s")}, nil},
		{"socket in a missing directory", []string{"--debug-socket-path=" + filepath.Join(dir, "missing", "s")},
			[]string{"does not exist"}},
		{"socket over a file", []string{"--debug-socket-path=" + file}, []string{"is not a socket"}},
		{"no seats", []string{"--max-requests-inflight=0", "--max-mutating-requests-inflight=0"},
			[]string{"must be positive with --enable-priority-and-fairness"}},
		{"no limit without priority and fairness", []string{"--max-requests-inflight=0", "--max-mutating-requests-inflight=0", "--enable-priority-and-fairness=false"}, nil},
		{"every error", []string{"--profiling=false", "--contention-profiling", "--max-requests-inflight=0", "--max-mutating-requests-inflight=0"},
			[]string{"--contention-profiling", "must be positive"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			errs := parseOptions(t, tt.args...).validateFeatures()
			if len(errs) != len(tt.want) {
				t.Fatalf("errors %v, want %d: %q", errs, len(tt.want), tt.want)
			}
			for i, want := range tt.want {
				if !strings.Contains(errs[i].Error(), want) {
					t.Errorf("error %d = %q, want it to contain %q", i, errs[i], want)
				}
			}
		})
	}
}

// TestFlowControlReadsOnly checks that the client priority and fairness
// gets reads the hosting cluster's objects and never writes their status.
func TestFlowControlReadsOnly(t *testing.T) {
	kube := fake.NewClientset()
	fc := readOnlyFlowControl{kube}.FlowcontrolV1()
	if _, err := fc.FlowSchemas().ApplyStatus(t.Context(), flowcontrolapply.FlowSchema("global-default"), metav1.ApplyOptions{FieldManager: "m", Force: true}); err != nil {
		t.Fatalf("ApplyStatus: %v", err)
	}
	if _, err := fc.FlowSchemas().List(t.Context(), metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := fc.PriorityLevelConfigurations().List(t.Context(), metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	var verbs []string
	for _, a := range kube.Actions() {
		verbs = append(verbs, a.GetVerb()+" "+a.GetResource().Resource)
	}
	if got := strings.Join(verbs, ", "); got != "list flowschemas, list prioritylevelconfigurations" {
		t.Errorf("calls %s, want the two lists only", got)
	}
}
