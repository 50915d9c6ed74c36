package integration

import (
	"bytes"
	"errors"
	"io"
	"sort"
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
