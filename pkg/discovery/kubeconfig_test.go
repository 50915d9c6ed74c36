package discovery

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/component-base/metrics/testutil"
	"k8s.io/klog/v2"
)

// kubeconfigWith is a member kubeconfig whose cluster and user entries
// carry the given extra YAML fields.
func kubeconfigWith(cluster, user string) string {
	return `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"` + cluster + `}}]
users: [{name: u, user: {` + user + `}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`
}

// TestMemberKubeconfigPolicy: plugins and file references are refused,
// naming the field, before anything is read or run; inline credentials
// pass; with the flag, files are allowed and relative to the kubeconfig.
func TestMemberKubeconfigPolicy(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "token"), []byte("secret-token"), 0o600); err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(dir, "ran")
	tests := []struct {
		name       string
		cluster    string
		user       string
		wantReason string
		wantField  string
	}{
		{name: "inline token", user: "token: t"},
		{name: "inline certificates", cluster: ", certificate-authority-data: " + testCAData,
			user: "client-certificate-data: " + testCAData + ", client-key-data: " + testCAData},
		{name: "proxy-url is data", cluster: `, proxy-url: "http://127.0.0.1:3128"`, user: "token: t"},
		{name: "exec", user: `exec: {apiVersion: client.authentication.k8s.io/v1, command: /bin/sh, args: [-c, "touch ` + marker + `"], interactiveMode: Never}`,
			wantReason: "exec", wantField: `users["u"].exec`},
		{name: "auth-provider", user: "auth-provider: {name: oidc, config: {idp-issuer-url: https://127.0.0.1:1}}",
			wantReason: "auth_provider", wantField: `users["u"].auth-provider`},
		{name: "tokenFile", user: "tokenFile: " + filepath.Join(dir, "token"),
			wantReason: "token_file", wantField: `users["u"].tokenFile`},
		{name: "client-certificate", user: "client-certificate: /etc/cert.pem, client-key-data: " + testCAData,
			wantReason: "client_certificate_file", wantField: `users["u"].client-certificate`},
		{name: "client-key", user: "client-certificate-data: " + testCAData + ", client-key: /etc/key.pem",
			wantReason: "client_key_file", wantField: `users["u"].client-key`},
		{name: "certificate-authority", cluster: ", certificate-authority: /var/run/secrets/kubernetes.io/serviceaccount/ca.crt", user: "token: t",
			wantReason: "certificate_authority_file", wantField: `clusters["c"].certificate-authority`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg, refused, err := memberRESTConfig(filepath.Join(dir, "member"), []byte(kubeconfigWith(tc.cluster, tc.user)), false)
			if tc.wantReason == "" {
				if err != nil || cfg == nil || len(refused) > 0 {
					t.Fatalf("inline kubeconfig: config %v, refused %v, err %v; want it accepted", cfg, refused, err)
				}
				return
			}
			if cfg != nil || !errors.Is(err, errRefusedKubeconfig) || len(refused) != 1 {
				t.Fatalf("config %v, refused %v, err %v; want it refused", cfg, refused, err)
			}
			if refused[0].Reason != tc.wantReason || refused[0].Field != tc.wantField {
				t.Errorf("refused %+v, want reason %s field %s", refused[0], tc.wantReason, tc.wantField)
			}
			for _, want := range []string{tc.wantField, "inline", AllowFilesAndPluginsFlag} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("message %q does not mention %q", err, want)
				}
			}
		})
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("the exec plugin ran")
	}
}

// testCAData is base64 of a PEM-looking block: clientcmd does not parse
// certificates when building a config.
const testCAData = "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCi0tLS0tRU5EIENFUlRJRklDQVRFLS0tLS0K"

// TestMemberKubeconfigAllowFiles: with the flag, a tokenFile relative to
// the kubeconfig is read from next to it.
func TestMemberKubeconfigAllowFiles(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, ".token"), []byte("secret-token"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, refused, err := memberRESTConfig(filepath.Join(dir, "member"), []byte(kubeconfigWith("", "tokenFile: .token")), true)
	if err != nil || len(refused) > 0 {
		t.Fatalf("refused %v, err %v; want the flag to allow a tokenFile", refused, err)
	}
	if cfg.BearerTokenFile != filepath.Join(dir, ".token") || cfg.BearerToken != "secret-token" {
		t.Errorf("token file %q, token %q; want the file next to the kubeconfig read", cfg.BearerTokenFile, cfg.BearerToken)
	}
}

// TestMemberKubeconfigRefusedInDir: a member whose kubeconfig uses a
// tokenFile is not started and is counted once; a running member whose
// kubeconfig turns into one keeps the configuration it was accepted with.
func TestMemberKubeconfigRefusedInDir(t *testing.T) {
	RegisterMetrics()
	dir := t.TempDir()
	write := func(id, content string) {
		if err := os.WriteFile(filepath.Join(dir, id), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	refusedCount := func() float64 {
		v, err := testutil.GetCounterMetricValue(kubeconfigsRefused.WithLabelValues("token_file"))
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	before := refusedCount()
	tokenFile := kubeconfigWith("", "tokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token")
	write("good", memberKubeconfig)
	write("bad", tokenFile)
	m := newMembers(testMembersConfig(dir, time.Minute, &clusterStore{}), "")
	ctx := klog.NewContext(t.Context(), klog.Background())
	defer m.stopAll()
	running := func() map[string]string {
		m.mu.Lock()
		defer m.mu.Unlock()
		out := map[string]string{}
		for id, rw := range m.running {
			out[id] = rw.fingerprint
		}
		return out
	}

	m.round(ctx)
	m.round(ctx) // the same content again: logged and counted once
	first := running()
	if _, ok := first["bad"]; ok || len(first) != 1 {
		t.Fatalf("running %v, want only good", first)
	}
	if got := refusedCount() - before; got != 1 {
		t.Errorf("refused counted %v times, want 1", got)
	}

	write("good", tokenFile)
	m.round(ctx)
	if now := running(); now["good"] != first["good"] {
		t.Errorf("good restarted with a refused kubeconfig: fingerprint %q, was %q", now["good"], first["good"])
	}
	if got := refusedCount() - before; got != 2 {
		t.Errorf("refused counted %v times, want 2", got)
	}
}
