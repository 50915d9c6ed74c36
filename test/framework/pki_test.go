package framework

import (
	"crypto/x509"
	"net"
	"slices"
	"testing"
)

func TestGeneratePKI(t *testing.T) {
	p, err := generatePKI(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name       string
		leaf       *keyPair
		ca         *keyPair
		usage      x509.ExtKeyUsage
		dnsName    string // verified as the server name when set
		wantOrg    string
		wantIPs    []string
		wantCommon string
	}{
		{name: "platform serving cert as the aggregator dials it", leaf: p.platformServing, ca: p.platformCA, usage: x509.ExtKeyUsageServerAuth, dnsName: "platform-apiserver.platform-system.svc", wantIPs: []string{"127.0.0.1"}},
		{name: "platform serving cert for direct access", leaf: p.platformServing, ca: p.platformCA, usage: x509.ExtKeyUsageServerAuth, dnsName: "localhost"},
		{name: "kube-apiserver serving cert", leaf: p.apiServerServing, ca: p.clusterCA, usage: x509.ExtKeyUsageServerAuth, dnsName: "localhost", wantIPs: []string{"127.0.0.1"}},
		{name: "admin is in system:masters", leaf: p.admin, ca: p.clientCA, usage: x509.ExtKeyUsageClientAuth, wantOrg: "system:masters", wantCommon: "admin"},
		{name: "front proxy client matches --requestheader-allowed-names", leaf: p.frontProxyClient, ca: p.frontProxyCA, usage: x509.ExtKeyUsageClientAuth, wantCommon: frontProxyClientCN},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			roots := x509.NewCertPool()
			roots.AddCert(tc.ca.cert)
			if _, err := tc.leaf.cert.Verify(x509.VerifyOptions{Roots: roots, DNSName: tc.dnsName, KeyUsages: []x509.ExtKeyUsage{tc.usage}}); err != nil {
				t.Fatalf("verify: %v", err)
			}
			for _, ip := range tc.wantIPs {
				if !slices.ContainsFunc(tc.leaf.cert.IPAddresses, func(got net.IP) bool { return got.Equal(net.ParseIP(ip)) }) {
					t.Errorf("IP SANs %v lack %s", tc.leaf.cert.IPAddresses, ip)
				}
			}
			if tc.wantOrg != "" && !slices.Contains(tc.leaf.cert.Subject.Organization, tc.wantOrg) {
				t.Errorf("organizations %v lack %s", tc.leaf.cert.Subject.Organization, tc.wantOrg)
			}
			if tc.wantCommon != "" && tc.leaf.cert.Subject.CommonName != tc.wantCommon {
				t.Errorf("common name %q, want %q", tc.leaf.cert.Subject.CommonName, tc.wantCommon)
			}
		})
	}
}

func TestPrefixWriter(t *testing.T) {
	var got []byte
	w := newPrefixWriter("etcd", writerFunc(func(b []byte) (int, error) { got = append(got, b...); return len(b), nil }))
	for _, chunk := range []string{"one\ntw", "o\n", "partial"} {
		if _, err := w.Write([]byte(chunk)); err != nil {
			t.Fatal(err)
		}
	}
	if want := "[etcd] one\n[etcd] two\n"; string(got) != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }

func TestRedactArgs(t *testing.T) {
	tests := []struct {
		name, arg, want string
	}{
		{name: "URL with password", arg: "--postgres-dsn=postgres://u:secret@127.0.0.1:5432/db", want: "--postgres-dsn=postgres://u:xxxxx@127.0.0.1:5432/db"},
		{name: "URL without password", arg: "--postgres-dsn=postgres://postgres@127.0.0.1:5432/db", want: "--postgres-dsn=postgres://postgres@127.0.0.1:5432/db"},
		{name: "keyword form", arg: "--postgres-dsn=host=h password=secret", want: "--postgres-dsn=(redacted)"},
		{name: "other flag", arg: "--secure-port=6443", want: "--secure-port=6443"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := redactArgs([]string{tc.arg})[0]; got != tc.want {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
}
