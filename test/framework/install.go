package framework

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
)

// Helpers for the install tests: the stack's own registration out of the
// way, installed manifests routed to loopback, serving certificates, and the
// pinned upstream CRDs the manifests refer to.

// UnregisterPlatform stops the framework's platform-apiserver and deletes the
// APIService and Service that Start registered, so that manifests can install
// their own.
func (cp *ControlPlane) UnregisterPlatform(ctx context.Context) error {
	if err := cp.StopPlatformAPIServer(); err != nil {
		return err
	}
	cp.mu.Lock()
	cp.platformRegistered = false
	cp.mu.Unlock()
	dyn, err := dynamic.NewForConfig(cp.adminConfig)
	if err != nil {
		return err
	}
	if err := dyn.Resource(apiServiceGVR).Delete(ctx, APIServiceName, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete APIService %s: %w", APIServiceName, err)
	}
	client, err := kubernetes.NewForConfig(cp.adminConfig)
	if err != nil {
		return err
	}
	if err := client.CoreV1().Services(platformNamespace).Delete(ctx, platformServiceName, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete Service %s/%s: %w", platformNamespace, platformServiceName, err)
	}
	return nil
}

// RouteServiceToLoopback makes an installed Service reach a pod that
// RunDeploymentPod runs on 127.0.0.1:port, as kube-proxy would reach the
// pod: the Service becomes an ExternalName for localhost (endpoints may not
// be loopback addresses) and the APIService that names it gets port, the port
// the aggregator then dials. Nothing else of the installed objects changes.
func (cp *ControlPlane) RouteServiceToLoopback(ctx context.Context, namespace, service, apiService string, port int) error {
	client, err := kubernetes.NewForConfig(cp.adminConfig)
	if err != nil {
		return err
	}
	svc, err := client.CoreV1().Services(namespace).Get(ctx, service, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if svc.Spec.Type != corev1.ServiceTypeExternalName {
		// Type changes keep cluster IPs unless cleared; recreate instead.
		if err := client.CoreV1().Services(namespace).Delete(ctx, service, metav1.DeleteOptions{}); err != nil {
			return err
		}
		fresh := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: svc.Name, Namespace: svc.Namespace, Labels: svc.Labels, Annotations: svc.Annotations},
			Spec: corev1.ServiceSpec{
				Type: corev1.ServiceTypeExternalName, ExternalName: "localhost",
				Ports: []corev1.ServicePort{{Name: "https", Port: int32(port)}},
			},
		}
		if _, err := client.CoreV1().Services(namespace).Create(ctx, fresh, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("route Service %s/%s to loopback: %w", namespace, service, err)
		}
	}
	dyn, err := dynamic.NewForConfig(cp.adminConfig)
	if err != nil {
		return err
	}
	patch, _ := json.Marshal(map[string]any{"spec": map[string]any{"service": map[string]any{"port": port}}})
	if _, err := dyn.Resource(apiServiceGVR).Patch(ctx, apiService, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("point APIService %s at port %d: %w", apiService, port, err)
	}
	return nil
}

// ServingCert is a CA and a serving certificate it signed, in PEM.
type ServingCert struct {
	CertPEM, KeyPEM, CAPEM []byte
}

// IssueServingCert makes a new CA and a serving certificate for dnsNames
// (and localhost, 127.0.0.1 and ::1, for direct checks).
func IssueServingCert(dnsNames ...string) (*ServingCert, error) {
	ca, err := newCA("platform-test-install-ca")
	if err != nil {
		return nil, err
	}
	leaf, err := ca.issue(certRequest{
		commonName: dnsNames[0],
		dnsNames:   append(append([]string(nil), dnsNames...), "localhost"),
		ips:        []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("::1")},
		usage:      x509.ExtKeyUsageServerAuth,
	})
	if err != nil {
		return nil, err
	}
	return &ServingCert{CertPEM: leaf.certPEM, KeyPEM: leaf.keyPEM, CAPEM: ca.certPEM}, nil
}

// ServiceAccountToken returns a token of ServiceAccount namespace/name
// (TokenRequest), for calls made as that identity.
func (cp *ControlPlane) ServiceAccountToken(ctx context.Context, namespace, name string) (string, error) {
	client, err := kubernetes.NewForConfig(cp.adminConfig)
	if err != nil {
		return "", err
	}
	tr, err := client.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		return "", err
	}
	return tr.Status.Token, nil
}

// UpstreamCRD is a CustomResourceDefinition file in a pinned Go module.
type UpstreamCRD struct {
	Module, Version, Sum string // Sum is the module's go.sum hash, checked
	File                 string
}

// PinnedCRDs are the CRDs the manifests' optional components use: the
// ServiceMonitor and PrometheusRule of the Prometheus Operator and cert-manager's Certificate
// and Issuer.
var PinnedCRDs = []UpstreamCRD{
	{"github.com/prometheus-operator/prometheus-operator", "v0.85.0", "h1:M5xLCLEoaW2IJfnuCwFzzpL+jSVQu3KGT84Pye+fW8s=",
		"example/prometheus-operator-crd/monitoring.coreos.com_servicemonitors.yaml"},
	{"github.com/prometheus-operator/prometheus-operator", "v0.85.0", "h1:M5xLCLEoaW2IJfnuCwFzzpL+jSVQu3KGT84Pye+fW8s=",
		"example/prometheus-operator-crd/monitoring.coreos.com_prometheusrules.yaml"},
	{"github.com/cert-manager/cert-manager", "v1.21.2", "h1:UWgoYM+KLNtRlqmoWOKjKBOBUPVHeepQ6/ac3ERJW68=",
		"deploy/crds/cert-manager.io_certificates.yaml"},
	{"github.com/cert-manager/cert-manager", "v1.21.2", "h1:UWgoYM+KLNtRlqmoWOKjKBOBUPVHeepQ6/ac3ERJW68=",
		"deploy/crds/cert-manager.io_issuers.yaml"},
}

// InstallCRDs downloads crds' modules through the Go module proxy (or the
// module cache), checks their sums, applies the files and waits until every
// CRD is Established.
func (cp *ControlPlane) InstallCRDs(ctx context.Context, crds []UpstreamCRD) error {
	for _, c := range crds {
		dir, err := downloadModule(ctx, c.Module, c.Version, c.Sum)
		if err != nil {
			return err
		}
		file := filepath.Join(dir, filepath.FromSlash(c.File))
		if _, stderr, err := cp.Kubectl(ctx, "apply", "--server-side", "--force-conflicts", "-f", file); err != nil {
			return fmt.Errorf("apply CRD %s: %w\n%s", c.File, err, stderr)
		}
		if _, stderr, err := cp.Kubectl(ctx, "wait", "--for=condition=Established", "--timeout=60s", "-f", file); err != nil {
			return fmt.Errorf("wait for CRD %s: %w\n%s", c.File, err, stderr)
		}
	}
	return nil
}

// downloadModule returns the directory of module@version in the module
// cache, downloading it if needed, after checking its hash.
func downloadModule(ctx context.Context, module, version, sum string) (string, error) {
	cmd := exec.CommandContext(ctx, "go", "mod", "download", "-json", module+"@"+version)
	// Outside any module, so no go.mod or go.sum is touched.
	cmd.Dir = os.TempDir()
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GO111MODULE=on")
	out, err := cmd.Output()
	var info struct{ Dir, Sum, Error string }
	_ = json.Unmarshal(out, &info)
	if err != nil {
		return "", fmt.Errorf("go mod download %s@%s: %w %s", module, version, err, info.Error)
	}
	if info.Error != "" {
		return "", fmt.Errorf("go mod download %s@%s: %s", module, version, info.Error)
	}
	if info.Sum != sum {
		return "", fmt.Errorf("%s@%s has sum %s, pinned %s", module, version, info.Sum, sum)
	}
	return info.Dir, nil
}

// WaitAPIServiceAvailable waits until the APIService is Available.
func (cp *ControlPlane) WaitAPIServiceAvailable(ctx context.Context, name string, timeout time.Duration) error {
	dyn, err := dynamic.NewForConfig(cp.adminConfig)
	if err != nil {
		return err
	}
	var last string
	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		obj, err := dyn.Resource(apiServiceGVR).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		ok, msg := apiServiceAvailable(obj)
		last = msg
		return ok, nil
	})
	if err != nil {
		return fmt.Errorf("APIService %s not Available: %w (last: %s)", name, err, last)
	}
	return nil
}

// KubeAPIServerCA returns the PEM CA that verifies kube-apiserver.
func (cp *ControlPlane) KubeAPIServerCA() []byte {
	return append([]byte(nil), cp.pki.clusterCA.certPEM...)
}
