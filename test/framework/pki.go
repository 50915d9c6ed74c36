package framework

import (
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"path/filepath"
)

// Names the aggregation layer and the platform-apiserver's registration rely on.
const (
	platformNamespace   = "platform-system"
	platformServiceName = "platform-apiserver"
	frontProxyClientCN  = "front-proxy-client"
)

// pki is every certificate and key the control plane uses, written under dir.
type pki struct {
	dir string

	clusterCA        *keyPair // signs the serving certs of kube-apiserver and of the components
	apiServerServing *keyPair
	componentServing *keyPair // kube-controller-manager's and kube-scheduler's, on loopback

	clientCA *keyPair // kube-apiserver's --client-ca-file; signs every user's client cert
	admin    *keyPair // O=system:masters

	frontProxyCA     *keyPair // --requestheader-client-ca-file
	frontProxyClient *keyPair // kube-apiserver's identity when it proxies to aggregated servers

	platformCA      *keyPair // the APIService's caBundle
	platformServing *keyPair

	// serviceAccountKeyFile holds the private key that signs service account
	// tokens; kube-apiserver also verifies with it.
	serviceAccountKeyFile string
}

// generatePKI creates every CA, certificate and key in dir.
func generatePKI(dir string) (*pki, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create PKI directory: %w", err)
	}
	p := &pki{dir: dir}
	loopback := []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("::1")}
	steps := []struct {
		file string
		make func() (*keyPair, error)
		into **keyPair
	}{
		{"cluster-ca", func() (*keyPair, error) { return newCA("platform-test-cluster-ca") }, &p.clusterCA},
		{"kube-apiserver", func() (*keyPair, error) {
			return p.clusterCA.issue(certRequest{
				commonName: "kube-apiserver",
				dnsNames:   []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"},
				ips:        loopback,
				usage:      x509.ExtKeyUsageServerAuth,
			})
		}, &p.apiServerServing},
		{"components", func() (*keyPair, error) {
			return p.clusterCA.issue(certRequest{commonName: "localhost", dnsNames: []string{"localhost"}, ips: loopback, usage: x509.ExtKeyUsageServerAuth})
		}, &p.componentServing},
		{"client-ca", func() (*keyPair, error) { return newCA("platform-test-client-ca") }, &p.clientCA},
		{"admin", func() (*keyPair, error) {
			return p.clientCA.issue(certRequest{commonName: "admin", organizations: []string{"system:masters"}, usage: x509.ExtKeyUsageClientAuth})
		}, &p.admin},
		{"front-proxy-ca", func() (*keyPair, error) { return newCA("platform-test-front-proxy-ca") }, &p.frontProxyCA},
		{"front-proxy-client", func() (*keyPair, error) {
			return p.frontProxyCA.issue(certRequest{commonName: frontProxyClientCN, usage: x509.ExtKeyUsageClientAuth})
		}, &p.frontProxyClient},
		{"platform-ca", func() (*keyPair, error) { return newCA("platform-test-platform-apiserver-ca") }, &p.platformCA},
		{"platform-apiserver", func() (*keyPair, error) {
			return p.platformCA.issue(certRequest{
				commonName: platformServiceName,
				// The aggregator verifies <service>.<namespace>.svc; direct
				// tests dial localhost or 127.0.0.1.
				dnsNames: []string{platformServiceName + "." + platformNamespace + ".svc", "localhost"},
				ips:      loopback,
				usage:    x509.ExtKeyUsageServerAuth,
			})
		}, &p.platformServing},
	}
	for _, s := range steps {
		kp, err := s.make()
		if err != nil {
			return nil, fmt.Errorf("generate %s certificate: %w", s.file, err)
		}
		if err := kp.write(dir, s.file); err != nil {
			return nil, err
		}
		*s.into = kp
	}
	if err := p.writeServiceAccountKey(); err != nil {
		return nil, err
	}
	return p, nil
}

func (p *pki) writeServiceAccountKey() error {
	key, err := newKey()
	if err != nil {
		return fmt.Errorf("generate service account key: %w", err)
	}
	keyPEM, err := privateKeyPEM(key)
	if err != nil {
		return err
	}
	p.serviceAccountKeyFile = filepath.Join(p.dir, "service-account.key")
	if err := os.WriteFile(p.serviceAccountKeyFile, keyPEM, 0o600); err != nil {
		return fmt.Errorf("write service account key: %w", err)
	}
	return nil
}

// issueClient returns a client certificate for user in groups, signed by the client CA.
func (p *pki) issueClient(user string, groups []string) (*keyPair, error) {
	return p.clientCA.issue(certRequest{commonName: user, organizations: groups, usage: x509.ExtKeyUsageClientAuth})
}
