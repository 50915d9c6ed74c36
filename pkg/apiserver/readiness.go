package apiserver

import (
	"errors"
	"net/http"
	"strings"

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
		return requestHeaderCALoaded(info)
	})
}

func requestHeaderCALoaded(info *genericapiserver.AuthenticationInfo) error {
	if rh := info.RequestHeaderConfig; rh != nil && len(rh.CAContentProvider.CurrentCABundleContent()) == 0 {
		return errors.New("the front-proxy (requestheader) client CA is not loaded yet")
	}
	return nil
}

// retryUntilAuthenticationLoaded answers API requests with 429 and
// Retry-After until the front-proxy CA is loaded. Readiness keeps a fresh
// replica out of a Service's endpoints, but not every path respects it (a
// port shared by replicas, an endpoint list that lags): a request that
// arrives early would be denied as anonymous (403), which makes client-go
// relist; a 429 makes it retry. Health and metrics endpoints pass.
func retryUntilAuthenticationLoaded(h http.Handler, info *genericapiserver.AuthenticationInfo) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.URL.Path, "/apis") && !strings.HasPrefix(r.URL.Path, "/api/") {
			h.ServeHTTP(w, r)
			return
		}
		if err := requestHeaderCALoaded(info); err != nil {
			w.Header().Set("Retry-After", "1")
			http.Error(w, "platform-apiserver is starting: "+err.Error()+"; retry", http.StatusTooManyRequests)
			return
		}
		h.ServeHTTP(w, r)
	})
}
