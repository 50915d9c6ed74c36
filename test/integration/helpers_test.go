package integration

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"

	"github.com/example/platform-apiserver/test/framework"
)

// pollAllowed retries call while it is Forbidden, for RBAC changes to land.
func pollAllowed(ctx context.Context, call func() error) error {
	var last error
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		last = call()
		if apierrors.IsForbidden(last) {
			return false, nil
		}
		return true, last
	})
	if err != nil && last != nil {
		return last
	}
	return err
}

// probePlatform GETs path on the platform-apiserver's own port without
// credentials, as a kubelet probe does, and returns the status and body.
func probePlatform(ctx context.Context, cp *framework.ControlPlane, path string) (int, string, error) {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(cp.PlatformServingCA())
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	return getPlatform(ctx, cp, client, path)
}

// getAsAdmin GETs path on the platform-apiserver's own port as the admin
// (anonymous users may read /readyz, not its single checks).
func getAsAdmin(ctx context.Context, cp *framework.ControlPlane, path string) (int, string, error) {
	client, err := rest.HTTPClientFor(cp.PlatformDirectConfig())
	if err != nil {
		return 0, "", err
	}
	return getPlatform(ctx, cp, client, path)
}

// getPlatform GETs path on the platform-apiserver's own port with client.
func getPlatform(ctx context.Context, cp *framework.ControlPlane, client *http.Client, path string) (int, string, error) {
	return getURL(ctx, client, cp.PlatformServerURL()+path)
}
