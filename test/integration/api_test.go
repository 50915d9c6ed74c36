package integration

import (
	"context"
	"regexp"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

func (e *env) testDiscovery(t *testing.T) {
	out := e.kubectl(t, "api-resources", "--api-group=platform.example.io", "-o", "wide")
	for _, want := range []string{"nodecapacities", "nc,nodecap", "clusternamespaces", "cns,clusterns", "clustercapacities", "cc,clustercap", "platform", "get,list"} {
		if !strings.Contains(out, want) {
			t.Errorf("api-resources lacks %q:\n%s", want, out)
		}
	}
	if !regexp.MustCompile(`(?m)^usagereports\s.*\sfalse\s+UsageReport\s+create\s*$`).MatchString(out) {
		t.Errorf("api-resources lacks usagereports (cluster-scoped, create only):\n%s", out)
	}
	if !regexp.MustCompile(`(?m)^placementreports\s.*\sfalse\s+PlacementReport\s+create\s*$`).MatchString(out) {
		t.Errorf("api-resources lacks placementreports (cluster-scoped, create only):\n%s", out)
	}
	if !regexp.MustCompile(`(?m)^localusagereports\s.*\strue\s+LocalUsageReport\s+create\s*$`).MatchString(out) {
		t.Errorf("api-resources lacks localusagereports (namespaced, create only):\n%s", out)
	}
	out = e.kubectl(t, "explain", "nodecapacity.status")
	for _, want := range []string{"allocatable", "schedulable", "Usage is the node's latest measured usage"} {
		if !strings.Contains(out, want) {
			t.Errorf("explain nodecapacity.status lacks %q:\n%s", want, out)
		}
	}
	out = e.kubectl(t, "explain", "clustercapacity.status")
	for _, want := range []string{"largestFree", "schedulable", "HasSchedulableCapacity"} {
		if !strings.Contains(out, want) {
			t.Errorf("explain clustercapacity.status lacks %q:\n%s", want, out)
		}
	}
	out = e.kubectl(t, "explain", "usagereport.spec")
	for _, want := range []string{"nodeSelector", "window", "--metrics-retention"} {
		if !strings.Contains(out, want) {
			t.Errorf("explain usagereport.spec lacks %q:\n%s", want, out)
		}
	}
	out = e.kubectl(t, "explain", "clusternamespace.status.quotas")
	if !strings.Contains(out, "hard") {
		t.Errorf("explain clusternamespace.status.quotas lacks hard:\n%s", out)
	}
	// OpenAPI v2 is served too, for older clients.
	if out := e.kubectl(t, "get", "--raw", "/openapi/v2"); !strings.Contains(out, "io.example.platform.v1alpha1.NodeCapacity") {
		t.Errorf("/openapi/v2 lacks the NodeCapacity definition")
	}
}

func (e *env) testWritesRejected(t *testing.T) {
	ctx := t.Context()
	client := dynamic.NewForConfigOrDie(e.cp.AdminConfig())
	ncs := client.Resource(schema.GroupVersionResource{Group: "platform.example.io", Version: "v1alpha1", Resource: "nodecapacities"})
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "platform.example.io/v1alpha1", "kind": "NodeCapacity",
		"metadata": map[string]any{"name": "prod-1.new"},
	}}
	writes := map[string]func(context.Context) error{
		"create": func(ctx context.Context) error { _, err := ncs.Create(ctx, obj, metav1.CreateOptions{}); return err },
		"update": func(ctx context.Context) error {
			o := obj.DeepCopy()
			o.SetName("prod-1.n1")
			_, err := ncs.Update(ctx, o, metav1.UpdateOptions{})
			return err
		},
		"patch": func(ctx context.Context) error {
			_, err := ncs.Patch(ctx, "prod-1.n1", "application/merge-patch+json", []byte(`{"metadata":{"labels":{"x":"y"}}}`), metav1.PatchOptions{})
			return err
		},
		"delete": func(ctx context.Context) error { return ncs.Delete(ctx, "prod-1.n1", metav1.DeleteOptions{}) },
		"deletecollection": func(ctx context.Context) error {
			return ncs.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
		},
	}
	for verb, write := range writes {
		if err := write(ctx); !apierrors.IsMethodNotSupported(err) {
			t.Errorf("%s: %v, want 405 MethodNotAllowed", verb, err)
		}
	}
	if _, err := e.platform.PlatformV1alpha1().NodeCapacities().Get(ctx, "prod-1.n1", metav1.GetOptions{}); err != nil {
		t.Errorf("prod-1.n1 after rejected writes: %v", err)
	}
}

func (e *env) testBadInput(t *testing.T) {
	const base = "/apis/platform.example.io/v1alpha1/nodecapacities"
	tests := []struct {
		name, path, want string
	}{
		{"negative limit", base + "?limit=-1", "limit must be zero"},
		{"malformed resourceVersion", base + "?resourceVersion=abc", "invalid resourceVersion"},
		{"malformed label selector", base + "?labelSelector=a+in+(", "unable to parse requirement"},
		{"unsupported field", base + "?fieldSelector=status.ready%3Dtrue", "supported field selectors"},
		{"bad schedulable value", base + "?fieldSelector=status.schedulable%3Dmaybe", "schedulable"},
		{"malformed continue", base + "?limit=1&continue=%25%25", "continue"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stderr := e.kubectlFails(t.Context(), t, e.cp.AdminKubeconfig(), "get", "--raw", tt.path)
			if !strings.Contains(stderr, "BadRequest") && !strings.Contains(stderr, "400") {
				t.Errorf("GET %s: want 400, got: %s", tt.path, stderr)
			}
			if !strings.Contains(stderr, tt.want) {
				t.Errorf("GET %s: error lacks %q: %s", tt.path, tt.want, stderr)
			}
		})
	}
	t.Run("resourceVersion ahead of the registry", func(t *testing.T) {
		// No retries: client-go retries a 504 with Retry-After, for a minute.
		err := e.platform.PlatformV1alpha1().RESTClient().Get().Resource("nodecapacities").Param("resourceVersion", "999999999").
			MaxRetries(0).Do(t.Context()).Error()
		if !apierrors.IsTimeout(err) || !apierrors.HasStatusCause(err, metav1.CauseTypeResourceVersionTooLarge) {
			t.Errorf("got %v, want 504 with cause ResourceVersionTooLarge", err)
		}
	})
}
