package integration

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"

	"github.com/example/platform-apiserver/test/framework"
)

// parseDocs reads a multi-document YAML render into objects.
func parseDocs(t *testing.T, yamlText string) []*unstructured.Unstructured {
	t.Helper()
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader([]byte(yamlText)), 4096)
	var out []*unstructured.Unstructured
	for {
		var obj map[string]any
		if err := dec.Decode(&obj); err != nil {
			if errors.Is(err, io.EOF) {
				return out
			}
			t.Fatalf("parse render: %v", err)
		}
		if len(obj) == 0 {
			continue
		}
		out = append(out, &unstructured.Unstructured{Object: obj})
	}
}

// field returns a field of the object of kind and name, nil if absent.
func field(objs []*unstructured.Unstructured, kind, name string, path ...string) any {
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			v, ok, err := unstructured.NestedFieldNoCopy(o.Object, path...)
			if !ok || err != nil {
				return nil
			}
			return v
		}
	}
	return nil
}

// dropImage removes image and imagePullPolicy from a containers list.
func dropImage(v any) any {
	list, ok := v.([]any)
	if !ok {
		return v
	}
	var out []any
	for _, c := range list {
		m, ok := c.(map[string]any)
		if !ok {
			out = append(out, c)
			continue
		}
		cp := map[string]any{}
		for k, x := range m {
			if k != "image" && k != "imagePullPolicy" {
				cp[k] = x
			}
		}
		out = append(out, cp)
	}
	return out
}

// objectNames lists kind/namespace/name of objs, sorted, without the kinds given.
func objectNames(objs []*unstructured.Unstructured, without ...string) []string {
	skip := map[string]bool{}
	for _, k := range without {
		skip[k] = true
	}
	var out []string
	for _, o := range objs {
		if !skip[o.GetKind()] {
			out = append(out, o.GetKind()+"/"+o.GetNamespace()+"/"+o.GetName())
		}
	}
	sort.Strings(out)
	return out
}

func newKubeClient(cp *framework.ControlPlane) (kubernetes.Interface, error) {
	return kubernetes.NewForConfig(cp.AdminConfig())
}

// podSecurityNamespace is where each variant's Deployment pod is dry-run
// under the base Namespace's Pod Security labels.
const podSecurityNamespace = "pod-security-restricted"

// preparePodSecurity creates podSecurityNamespace with the labels of the
// base's Namespace, which must enforce, audit and warn restricted, and the
// ServiceAccount the pods run as. (PodSecurity enforces on pods only; a
// Deployment merely warns, so the pods are what is dry-run.)
func (e *installEnv) preparePodSecurity(t *testing.T, base []*unstructured.Unstructured) {
	t.Helper()
	labels, _ := field(base, "Namespace", "platform-system", "metadata", "labels").(map[string]any)
	for _, mode := range []string{"enforce", "audit", "warn"} {
		if got := labels["pod-security.kubernetes.io/"+mode]; got != "restricted" {
			t.Errorf("the base Namespace's pod-security.kubernetes.io/%s is %v, want restricted", mode, got)
		}
	}
	ns := map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": podSecurityNamespace, "labels": labels}}
	sa := map[string]any{"apiVersion": "v1", "kind": "ServiceAccount", "metadata": map[string]any{"name": "platform-apiserver", "namespace": podSecurityNamespace}}
	e.applyObjects(t, "pod-security-namespace.json", ns, sa)
}

// dryRunPodSecurity dry-runs the pod of the variant's Deployment in
// podSecurityNamespace: admitted, with no PodSecurity warning.
func (e *installEnv) dryRunPodSecurity(t *testing.T, variant string, objs []*unstructured.Unstructured) {
	t.Helper()
	spec := field(objs, "Deployment", "platform-apiserver", "spec", "template", "spec")
	if spec == nil {
		t.Fatalf("%s: no Deployment platform-apiserver", variant)
	}
	pod := map[string]any{"apiVersion": "v1", "kind": "Pod", "metadata": map[string]any{"name": "pod-security-" + variant, "namespace": podSecurityNamespace}, "spec": spec}
	file := filepath.Join("dry-run", "pod-security-"+variant+".json")
	writeJSON(t, filepath.Join(e.work, file), pod)
	out := e.sh(t.Context(), t, "kubectl create --dry-run=server -f "+file)
	if !strings.Contains(out, "created (server dry run)") || strings.Contains(out, "PodSecurity") {
		t.Errorf("%s: the Deployment's pod under enforce=restricted:\n%s", variant, out)
	}
}

// applyObjects applies objs (a List) from file in the work directory.
func (e *installEnv) applyObjects(t *testing.T, file string, objs ...map[string]any) {
	t.Helper()
	items := make([]any, len(objs))
	for i, o := range objs {
		items[i] = o
	}
	writeJSON(t, filepath.Join(e.work, file), map[string]any{"apiVersion": "v1", "kind": "List", "items": items})
	e.sh(t.Context(), t, "kubectl apply -f "+file)
}

func writeJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
