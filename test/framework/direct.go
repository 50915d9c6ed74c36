package framework

import "k8s.io/client-go/rest"

// PlatformDirectConfig returns a rest.Config for the admin that talks to the
// platform-apiserver on its own port, not through kube-apiserver's
// aggregator: a client of one replica, which sees connection refused (and
// retries its watches) while that replica restarts, where the aggregator
// would answer 503.
func (cp *ControlPlane) PlatformDirectConfig() *rest.Config {
	return &rest.Config{
		Host: cp.PlatformServerURL(),
		TLSClientConfig: rest.TLSClientConfig{
			CAData:   cp.pki.platformCA.certPEM,
			CertData: cp.pki.admin.certPEM,
			KeyData:  cp.pki.admin.keyPEM,
		},
	}
}
