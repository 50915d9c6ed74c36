package integration

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"k8s.io/client-go/rest"
)

// testHostileInput sends what a careless or hostile client might, as raw
// HTTP through kube-apiserver's aggregator: each is a 4xx whose message
// says what to fix and never echoes PostgreSQL, and the server serves a
// normal list afterwards. A limit beyond the page size is served as the
// page size (clamped, not refused); a watch from a resourceVersion the
// registry has not reached is kube-apiserver's 504 with Retry-After.
func (e *env) testHostileInput(t *testing.T) {
	const nc = "/apis/platform.example.io/v1alpha1/nodecapacities"
	cfg := e.cp.AdminConfig()
	client, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	do := func(t *testing.T, method, pathAndQuery, body string) (int, http.Header, string) {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), method, strings.TrimSuffix(cfg.Host, "/")+pathAndQuery, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Accept", "application/json")
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("%s %.80s: %v", method, pathAndQuery, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header, string(b)
	}
	values := func(n int) string {
		v := make([]string, n)
		for i := range v {
			v[i] = fmt.Sprintf("v%d", i)
		}
		return strings.Join(v, ",")
	}
	requirements, fieldRequirements := make([]string, 1000), make([]string, 1000)
	for i := range requirements {
		requirements[i] = fmt.Sprintf("k%d%%3Dv", i)
		fieldRequirements[i] = fmt.Sprintf("status.nodeName%%21%%3Dn%d", i)
	}
	report := func(cluster string) string {
		return `{"apiVersion":"platform.example.io/v1alpha1","kind":"UsageReport","spec":{"cluster":"` + cluster + `","window":"1h"}}`
	}

	for _, tc := range []struct {
		name, method, path, body string
		code                     int
		want                     string
	}{
		{name: "30,000-value notin", path: nc + "?labelSelector=pool+notin+(" + values(30000) + ")", code: 400, want: "--max-selector-bytes"},
		{name: "2,000-value in", path: nc + "?labelSelector=pool+in+(" + values(2000) + ")", code: 400, want: "2000 values, more than the 1000 this server accepts (--max-selector-values)"},
		{name: "1,000 requirements", path: nc + "?labelSelector=" + strings.Join(requirements, ","), code: 400, want: "1000 requirements, more than the 100 this server accepts (--max-selector-requirements)"},
		{name: "1,000 field requirements", path: nc + "?fieldSelector=" + strings.Join(fieldRequirements, ","), code: 400, want: "1000 requirements, more than the 100 this server accepts (--max-selector-requirements)"},
		{name: "limit 2^63-1 is the page size", path: nc + "?limit=9223372036854775807", code: 200, want: `"kind":"NodeCapacityList"`},
		{name: "negative limit", path: nc + "?limit=-5", code: 400, want: "limit must be zero (no limit) or positive"},
		{name: "NUL in a field selector", path: nc + "?fieldSelector=status.nodeName%3Dn%001", code: 400, want: "contains a NUL character"},
		{name: "invalid UTF-8 in a field selector", path: nc + "?fieldSelector=metadata.name%3Dprod-1.n%FF", code: 400, want: "is not valid UTF-8"},
		{name: "invalid UTF-8 in a namespace", path: "/apis/platform.example.io/v1alpha1/namespaces/team-%C3/clusternamespaces", code: 400, want: "not valid UTF-8"},
		{name: "NUL in a name", path: nc + "/prod-1.n%001", code: 400, want: "the name contains a NUL character"},
		{name: "invalid UTF-8 in a name", path: nc + "/prod-1.n%FE", code: 400, want: "the name is not valid UTF-8"},
		{name: "NUL in a UsageReport field", method: http.MethodPost, path: "/apis/platform.example.io/v1alpha1/usagereports", body: report(`prod-1\u0000`), code: 400, want: "spec.cluster"},
		{name: "watch from a future resourceVersion", path: nc + "?watch=true&resourceVersion=999999999", code: 504, want: "Too large resource version"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			method := tc.method
			if method == "" {
				method = http.MethodGet
			}
			code, header, body := do(t, method, tc.path, tc.body)
			if code != tc.code || !strings.Contains(body, tc.want) {
				t.Errorf("%s %.100s: %d %.600s\nwant %d containing %q", method, tc.path, code, body, tc.code, tc.want)
			}
			for _, db := range []string{"SQLSTATE", "invalid byte sequence", "ERROR:", "pq:", "pgx", "jsonb"} {
				if strings.Contains(body, db) {
					t.Errorf("the answer echoes the database (%q): %.600s", db, body)
				}
			}
			if code == http.StatusGatewayTimeout && header.Get("Retry-After") != "1" {
				t.Errorf("504 without Retry-After: 1 (headers %v)", header)
			}
		})
	}
	t.Run("still serving", func(t *testing.T) {
		if code, _, body := do(t, http.MethodGet, nc+"?labelSelector=pool+notin+(small,tiny)", ""); code != 200 || !strings.Contains(body, "prod-1.n1") {
			t.Errorf("a normal list afterwards: %d %.300s", code, body)
		}
	})
}
