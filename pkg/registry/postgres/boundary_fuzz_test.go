package postgres_test

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metainternalversionscheme "k8s.io/apimachinery/pkg/apis/meta/internalversion/scheme"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/example/platform-apiserver/pkg/apis/platform"
	"github.com/example/platform-apiserver/pkg/apis/platform/v1alpha1"
	"github.com/example/platform-apiserver/pkg/apiserver"
	"github.com/example/platform-apiserver/pkg/registry"
	"github.com/example/platform-apiserver/pkg/registry/clustercapacity"
	"github.com/example/platform-apiserver/pkg/registry/clusternamespace"
	"github.com/example/platform-apiserver/pkg/registry/nodecapacity"
	"github.com/example/platform-apiserver/pkg/registry/postgres"
	"github.com/example/platform-apiserver/pkg/registry/postgres/views"
	"github.com/example/platform-apiserver/pkg/registry/store"
	"github.com/example/platform-apiserver/pkg/registry/usagereport"
	pgtest "github.com/example/platform-apiserver/test/framework/postgres"
)

type allowAll struct{}

func (allowAll) Authorize(context.Context, authorizer.Attributes) (authorizer.Decision, string, error) {
	return authorizer.DecisionAllow, "", nil
}

// FuzzHTTPBoundary drives the REST handlers of every kind over a real
// registry with what a client controls — a list's query string (label and
// field selectors, limit, continue, resourceVersion), a name or namespace,
// a UsageReport body — decoded as the generic API server decodes them, and
// asserts that no answer is a 500 (an error that is not a status, or one
// with code 500, is what the server would answer 500) and nothing panics.
func FuzzHTTPBoundary(f *testing.F) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	s, err := postgres.Open(ctx, pgtest.NewTestDatabase(f), postgres.Options{})
	if err != nil {
		f.Fatal(err)
	}
	defer s.Close()
	if err := s.Migrate(ctx); err != nil {
		f.Fatal(err)
	}
	n := node("n1", 4000, 1<<30)
	n.Labels["pool"] = "big"
	if err := s.Apply(ctx, store.Batch{ClusterID: "prod-1", Nodes: []store.Node{n, node("n2", 2000, 1<<30)},
		Namespaces: []store.Namespace{namespace("team-a"), namespace("team-b")}}); err != nil {
		f.Fatal(err)
	}
	first, err := s.NodeCapacities().List(ctx, store.ListOptions{Limit: 1})
	if err != nil {
		f.Fatal(err)
	}

	w := registry.WatchConfig{}
	type storage interface {
		rest.Lister
		rest.Getter
	}
	kinds := []struct {
		resource   string
		storage    storage
		namespaced bool
	}{
		{"nodecapacities", nodecapacity.NewREST(s.NodeCapacities(), w, nil), false},
		{"clusternamespaces", clusternamespace.NewREST(s.ClusterNamespaces(), w, nil), true},
		{"clustercapacities", clustercapacity.NewREST(s.ClusterCapacities(), w, registry.MemberStaleness{}), false},
	}
	reports := usagereport.NewREST(s, postgres.Source(s, views.ClusterNamespace).Get, allowAll{}, 24*time.Hour)
	decoder := apiserver.Codecs.UniversalDecoder(platform.SchemeGroupVersion)

	for i, seed := range []struct{ query, name, body string }{
		{"labelSelector=pool%3Dbig&limit=1", "prod-1.n1", `{"apiVersion":"platform.example.io/v1alpha1","kind":"UsageReport","spec":{"cluster":"prod-1","window":"1h"}}`},
		{"labelSelector=pool+notin+(a,b,c)&fieldSelector=status.schedulable%3Dtrue", "team-a", `{"apiVersion":"platform.example.io/v1alpha1","kind":"UsageReport","spec":{"cluster":"prod-1","nodeSelector":"pool in (big,small)","window":"1h"}}`},
		{"fieldSelector=metadata.name%3Dprod-1.n%00&limit=9223372036854775807", "prod-1.n\x00", `{"apiVersion":"platform.example.io/v1alpha1","kind":"UsageReport","spec":{"cluster":"prod-1\u0000","namespace":"team-a","window":"1h"}}`},
		{"fieldSelector=status.nodeName%3D%FF&resourceVersion=1&resourceVersionMatch=Exact", "\xff", `{"apiVersion":"platform.example.io/v1alpha1","kind":"UsageReport","spec":{"cluster":"\xff","nodeName":"n1","window":"1h"}}`},
		{"limit=1&continue=" + url.QueryEscape(first.Continue), "prod-1", `{"spec":{"cluster":"prod-1","window":"-1h"}}`},
		{"continue=abc&limit=-1&labelSelector=x>9223372036854775807", "prod-1.", `not json`},
		{"labelSelector=" + url.QueryEscape(platform.ClusterLabel+" in (prod-1,prod-2),size<3"), "", `{"kind":"UsageReport","spec":{"cluster":"x","window":"1000000h"}}`},
		{"fieldSelector=" + url.QueryEscape("status.available.other.nvidia.com/gpu!=0,status.devices.free.gpu.example.com=1Gi,status.requested.other.x=9E"), "prod-1.n2", `{}`},
	} {
		for k := range kinds {
			f.Add(uint8(i+k), seed.query, seed.name, []byte(seed.body))
		}
	}

	// One kind per input (kind picks it), so an input costs a few queries.
	f.Fuzz(func(t *testing.T, kind uint8, query, name string, body []byte) {
		ctx, cancel := context.WithTimeout(genericapirequest.WithUser(context.Background(), &user.DefaultInfo{Name: "fuzz"}), time.Minute)
		defer cancel()
		check := func(what string, err error) {
			t.Helper()
			if err == nil {
				return
			}
			var status apierrors.APIStatus
			if !errors.As(err, &status) {
				t.Fatalf("%s: %v (%T) is not a status: the server would answer 500", what, err, err)
			}
			if code := status.Status().Code; code == http.StatusInternalServerError || code == 0 {
				t.Fatalf("%s: %d %v", what, code, err)
			}
		}
		k := kinds[int(kind)%len(kinds)]
		nsCtx := ctx // the name is the namespace of a namespaced kind's list, as in its URL
		if k.namespaced {
			nsCtx = genericapirequest.WithNamespace(ctx, name)
		}
		var opts metainternalversion.ListOptions
		if values, err := url.ParseQuery(query); err == nil &&
			metainternalversionscheme.ParameterCodec.DecodeParameters(values, metav1.SchemeGroupVersion, &opts) == nil {
			_, err := k.storage.List(nsCtx, &opts)
			check("list "+k.resource+" ?"+query, err)
		}
		if k.namespaced {
			nsCtx = genericapirequest.WithNamespace(ctx, "team-a")
		}
		_, err := k.storage.Get(nsCtx, name, &metav1.GetOptions{})
		check("get "+k.resource+" "+name, err)
		obj, _, err := decoder.Decode(body, new(v1alpha1.SchemeGroupVersion.WithKind("UsageReport")), &platform.UsageReport{})
		if err != nil {
			return // the generic server answers 400 for a body it cannot decode
		}
		if _, ok := obj.(*platform.UsageReport); ok {
			_, err = reports.Create(ctx, obj, nil, &metav1.CreateOptions{})
			check("create usagereport "+string(body), err)
		}
	})
}
