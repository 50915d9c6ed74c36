package framework

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"time"

	"k8s.io/client-go/kubernetes"
)

const apiServerStartTimeout = 3 * time.Minute

// startKubeAPIServer runs kube-apiserver on a free loopback port with the
// aggregation layer (front proxy) configured, and waits for /readyz.
func (cp *ControlPlane) startKubeAPIServer(ctx context.Context) error {
	port, err := freePort()
	if err != nil {
		return err
	}
	url := "https://127.0.0.1:" + strconv.Itoa(port)
	p := cp.pki
	args := []string{
		"--etcd-servers=" + cp.etcdURL,
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(port),
		"--cert-dir=" + filepath.Join(cp.workDir, "kube-apiserver-certs"),
		"--tls-cert-file=" + p.apiServerServing.certFile,
		"--tls-private-key-file=" + p.apiServerServing.keyFile,
		"--client-ca-file=" + p.clientCA.certFile,
		"--authorization-mode=RBAC",
		"--service-cluster-ip-range=10.0.0.0/24",
		"--allow-privileged=true",
		// No kubelet creates service-account tokens for pods here; tests that
		// create pods must not depend on the default service account.
		"--disable-admission-plugins=ServiceAccount",
		// Endpoints may not point at 127.0.0.0/8, so no endpoint reconciler.
		"--endpoint-reconciler-type=none",
		"--service-account-issuer=" + url,
		"--service-account-key-file=" + p.serviceAccountKeyFile,
		"--service-account-signing-key-file=" + p.serviceAccountKeyFile,
		// Aggregation: kube-apiserver resolves APIServices through their
		// Service (an ExternalName pointing at localhost), not Endpoints.
		"--enable-aggregator-routing=false",
		"--requestheader-client-ca-file=" + p.frontProxyCA.certFile,
		"--requestheader-allowed-names=" + frontProxyClientCN,
		"--requestheader-username-headers=X-Remote-User",
		"--requestheader-group-headers=X-Remote-Group",
		"--requestheader-extra-headers-prefix=X-Remote-Extra-",
		"--proxy-client-cert-file=" + p.frontProxyClient.certFile,
		"--proxy-client-key-file=" + p.frontProxyClient.keyFile,
		"--profiling=false",
	}
	args = append(args, cp.opts.ExtraKubeAPIServerArgs...)
	cp.apiServerURL = url
	cp.adminConfig = clientConfig(url, p.clusterCA.certPEM, p.admin)
	client, err := kubernetes.NewForConfig(cp.adminConfig)
	if err != nil {
		return fmt.Errorf("build kube-apiserver client: %w", err)
	}
	ready := func(ctx context.Context) error {
		_, err := client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return err
	}
	proc, err := cp.startComponent(ctx, "kube-apiserver", filepath.Join(cp.binDir, "kube-apiserver"), args, apiServerStartTimeout, ready)
	if err != nil {
		return fmt.Errorf("start kube-apiserver: %w", err)
	}
	cp.apiServer = proc
	cp.adminKubeconfig = filepath.Join(cp.workDir, "kubeconfig")
	return writeKubeconfig(cp.adminKubeconfig, url, p.clusterCA.certPEM, "admin", p.admin)
}
