package framework

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"time"
)

const etcdStartTimeout = 60 * time.Second

// startEtcd runs a single-member etcd on two free loopback ports and waits
// until /health answers.
func (cp *ControlPlane) startEtcd(ctx context.Context) error {
	ports, err := freePorts(2)
	if err != nil {
		return err
	}
	clientURL := "http://127.0.0.1:" + strconv.Itoa(ports[0])
	peerURL := "http://127.0.0.1:" + strconv.Itoa(ports[1])
	args := []string{
		"--name=default",
		"--data-dir=" + filepath.Join(cp.workDir, "etcd"),
		"--listen-client-urls=" + clientURL,
		"--advertise-client-urls=" + clientURL,
		"--listen-peer-urls=" + peerURL,
		"--initial-advertise-peer-urls=" + peerURL,
		"--initial-cluster=default=" + peerURL,
		// Test data is disposable; skipping fsync saves seconds per run.
		"--unsafe-no-fsync=true",
		"--log-level=warn",
	}
	p, err := cp.startComponent(ctx, "etcd", filepath.Join(cp.binDir, "etcd"), args, etcdStartTimeout,
		httpCheck(clientURL+"/health", nil))
	if err != nil {
		return fmt.Errorf("start etcd: %w", err)
	}
	cp.etcd = p
	cp.etcdURL = clientURL
	return nil
}
