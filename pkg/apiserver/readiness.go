package apiserver

import (
	"errors"
	"net/http"
	"strings"
	"time"

	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/apiserver/pkg/server/healthz"
)

// authenticationLoaded is a readiness check that passes once the client
// CAs the delegated authentication loads from
// kube-system/extension-apiserver-authentication are in: the front-proxy
// (requestheader) CA and the client-certificate CA. Before that, requests
// kube-apiserver proxies (front-proxy client certificates) would be taken
// for anonymous and denied, and clients with certificates of their own
// refused (401), so a fresh replica must not take traffic yet.
func authenticationLoaded(info *genericapiserver.AuthenticationInfo, serving *genericapiserver.SecureServingInfo) healthz.HealthChecker {
	return healthz.NamedCheck("authentication-config", func(*http.Request) error {
		return authenticationCAsLoaded(info, serving)
	})
}

func authenticationCAsLoaded(info *genericapiserver.AuthenticationInfo, serving *genericapiserver.SecureServingInfo) error {
	var frontProxy int
	if rh := info.RequestHeaderConfig; rh != nil {
		if frontProxy = len(rh.CAContentProvider.CurrentCABundleContent()); frontProxy == 0 {
			return errors.New("the front-proxy (requestheader) client CA is not loaded yet")
		}
	}
	// The serving CAs are the client-certificate CA and the front-proxy
	// one joined: more than the front-proxy's once the first is in. A
	// hosting cluster that publishes no client-certificate CA never
	// completes it: after clientCAWait the check passes without it.
	if serving != nil && serving.ClientCA != nil && len(serving.ClientCA.CurrentCABundleContent()) <= frontProxy && time.Since(processStart) < clientCAWait {
		return errors.New("the client-certificate CA is not loaded yet")
	}
	return nil
}

// processStart is when the process started, as far as clientCAWait goes.
var processStart = time.Now()

// clientCAWait bounds the wait for a client-certificate CA that may not be
// published.
const clientCAWait = 30 * time.Second

// retryUntilAuthenticationLoaded answers API requests with 429 and
// Retry-After until the client CAs are loaded. Readiness keeps a fresh
// replica out of a Service's endpoints, but not every path respects it (a
// port shared by replicas, an endpoint list that lags): a request that
// arrives early would be denied as anonymous (403) or refused (401), which
// makes client-go relist; a 429 makes it retry. Health and metrics
// endpoints pass.
func retryUntilAuthenticationLoaded(h http.Handler, info *genericapiserver.AuthenticationInfo, serving *genericapiserver.SecureServingInfo) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.URL.Path, "/apis") && !strings.HasPrefix(r.URL.Path, "/api/") {
			h.ServeHTTP(w, r)
			return
		}
		if err := authenticationCAsLoaded(info, serving); err != nil {
			w.Header().Set("Retry-After", "1")
			http.Error(w, "platform-apiserver is starting: "+err.Error()+"; retry", http.StatusTooManyRequests)
			return
		}
		h.ServeHTTP(w, r)
	})
}
