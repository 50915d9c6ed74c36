package framework

import (
	"fmt"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// kubeconfigCluster names the cluster and context in every kubeconfig written here.
const kubeconfigCluster = "platform-local"

// clientConfig returns a rest.Config for server that trusts caPEM and
// authenticates with client.
func clientConfig(server string, caPEM []byte, client *keyPair) *rest.Config {
	return &rest.Config{
		Host: server,
		TLSClientConfig: rest.TLSClientConfig{
			CAData:   caPEM,
			CertData: client.certPEM,
			KeyData:  client.keyPEM,
		},
		QPS:   50,
		Burst: 100,
	}
}

// writeKubeconfig writes a self-contained kubeconfig (certificates embedded)
// for server and client to path.
func writeKubeconfig(path, server string, caPEM []byte, user string, client *keyPair) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[kubeconfigCluster] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: caPEM}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{ClientCertificateData: client.certPEM, ClientKeyData: client.keyPEM}
	cfg.Contexts[kubeconfigCluster] = &clientcmdapi.Context{Cluster: kubeconfigCluster, AuthInfo: user}
	cfg.CurrentContext = kubeconfigCluster
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return fmt.Errorf("write kubeconfig %s: %w", path, err)
	}
	return nil
}
