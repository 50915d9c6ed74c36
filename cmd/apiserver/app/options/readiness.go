package options

import (
	"errors"
	"net/http"

	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/apiserver/pkg/server/healthz"
)

// authenticationLoaded is a readiness check that passes once the front-proxy
// client CA the delegated authentication loads from
// kube-system/extension-apiserver-authentication is in. Before that, requests kube-apiserver proxies
// (front-proxy client certificates) would be taken for anonymous and denied,
// so a fresh replica must not take traffic yet.
func authenticationLoaded(info *genericapiserver.AuthenticationInfo) healthz.HealthChecker {
	return healthz.NamedCheck("authentication-config", func(*http.Request) error {
		if rh := info.RequestHeaderConfig; rh != nil && len(rh.CAContentProvider.CurrentCABundleContent()) == 0 {
			return errors.New("the front-proxy (requestheader) client CA is not loaded yet")
		}
		return nil
	})
}
