package framework

import (
	"context"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"path/filepath"
)

// simulatorBinaries are the programs StartSimulator runs from BinDir.
var simulatorBinaries = []string{"kwok", "metrics-server"}

// simulator is kwok and metrics-server, started by Options.StartSimulator.
type simulator struct {
	kwok          *process
	kwokPort      int // kubelet port of every simulated node
	metricsServer *process
	metricsPort   int
	// Both serving certificates are signed by the cluster CA.
	kwokServing, metricsServing *keyPair
}

// startSimulator starts kwok, then metrics-server, registers metrics.k8s.io
// and waits until kube-apiserver serves it.
func (cp *ControlPlane) startSimulator(ctx context.Context) error {
	for _, b := range simulatorBinaries {
		if _, err := os.Stat(filepath.Join(cp.binDir, b)); err != nil {
			return fmt.Errorf("simulator binary %s missing from %s (run hack/build-tools.sh, or turn Options.StartSimulator off): %w", b, cp.binDir, err)
		}
	}
	sim := &simulator{}
	if err := sim.issueCerts(cp.pki); err != nil {
		return err
	}
	cp.sim = sim
	if err := cp.startKwok(ctx); err != nil {
		return err
	}
	return cp.startMetricsServer(ctx)
}

// issueCerts signs the serving certificates of kwok (dialled by IP as each
// node's kubelet) and metrics-server (verified by the aggregator as
// metrics-server.kube-system.svc).
func (s *simulator) issueCerts(p *pki) error {
	loopback := []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("::1")}
	certs := []struct {
		file string
		req  certRequest
		into **keyPair
	}{
		{"kwok", certRequest{commonName: "kwok", dnsNames: []string{"localhost"}, ips: loopback, usage: x509.ExtKeyUsageServerAuth}, &s.kwokServing},
		{"metrics-server", certRequest{
			commonName: metricsServiceName,
			dnsNames:   []string{metricsServiceName + "." + metricsNamespace + ".svc", "localhost"},
			ips:        loopback,
			usage:      x509.ExtKeyUsageServerAuth,
		}, &s.metricsServing},
	}
	for _, c := range certs {
		kp, err := p.clusterCA.issue(c.req)
		if err != nil {
			return fmt.Errorf("generate %s certificate: %w", c.file, err)
		}
		if err := kp.write(p.dir, c.file); err != nil {
			return err
		}
		*c.into = kp
	}
	return nil
}
