package framework

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/client-go/rest"
)

// UserConfig returns a rest.Config and the path of a kubeconfig for user name
// in groups, authenticated by a client certificate signed by kube-apiserver's
// client CA. The user has no permissions until a test binds some with RBAC.
func (cp *ControlPlane) UserConfig(name string, groups ...string) (*rest.Config, string, error) {
	if name == "" {
		return nil, "", fmt.Errorf("user config: empty user name")
	}
	client, err := cp.pki.issueClient(name, groups)
	if err != nil {
		return nil, "", fmt.Errorf("issue client certificate for user %q: %w", name, err)
	}
	dir := filepath.Join(cp.workDir, "users")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, "", fmt.Errorf("create users directory: %w", err)
	}
	path := filepath.Join(dir, fileSafe(name)+".kubeconfig")
	if err := writeKubeconfig(path, cp.apiServerURL, cp.pki.clusterCA.certPEM, name, client); err != nil {
		return nil, "", err
	}
	return clientConfig(cp.apiServerURL, cp.pki.clusterCA.certPEM, client), path, nil
}

// fileSafe maps a user name such as system:serviceaccount:ns:sa to a file name.
func fileSafe(name string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_', r == '.':
			return r
		}
		return '_'
	}, name)
}
