package integration

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/example/platform-apiserver/test/framework"
)

// TestDiscoveryLeaderFailover runs two replicas: one holds the discovery
// Lease and writes; when it dies without releasing the Lease, the other
// takes over within about the lease duration and the mirror keeps up.
func TestDiscoveryLeaderFailover(t *testing.T) {
	const lease = 3 * time.Second
	e := newEnv(t, framework.Options{
		PlatformAPIServerBinary: os.Getenv("PLATFORM_APISERVER_BINARY"),
		ExtraPlatformArgs: []string{
			"--permit-port-sharing",
			"--cluster-id=local",
			"--member-kubeconfig=kubeconfig",
			"--discovery-batch-delay=50ms",
			"--leader-elect-lease-duration=" + lease.String(),
			"--leader-elect-renew-deadline=2s",
			"--leader-elect-retry-period=250ms",
		},
	})
	ctx := t.Context()
	holder := func(ctx context.Context) string {
		return e.jsonpath(ctx, "{.spec.holderIdentity}", "get", "lease", "-n", "kube-system", "platform-apiserver-discovery")
	}
	mirrored := func(ns string) {
		t.Helper()
		e.kubectl(t, "create", "namespace", ns)
		eventually(t, ns+" mirrored", mirrorTimeout, func(ctx context.Context) (bool, string) {
			out, _, err := e.cp.Kubectl(ctx, "get", "clusternamespace", "local", "-n", ns, "-o", "name")
			return err == nil && strings.Contains(out, "local"), out
		})
	}

	replica, err := e.cp.StartPlatformReplica(ctx, "platform-apiserver-2")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = replica.Stop() })
	mirrored("before-failover")
	first := holder(ctx)
	if first == "" {
		t.Fatal("no replica holds the discovery lease")
	}

	// Crash the first server: whichever held the lease, the replica holds it
	// afterwards.
	if err := e.cp.KillPlatformAPIServer(); err != nil {
		t.Fatal(err)
	}
	mirrored("after-first-kill")
	if err := e.cp.StartPlatformAPIServer(ctx); err != nil {
		t.Fatal(err)
	}
	leader := holder(ctx)

	// Crash the replica, now certainly the leader, without releasing the
	// lease: the restarted server must take over once the lease expires.
	killed := time.Now()
	if err := replica.Kill(); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a new lease holder", 4*lease, func(ctx context.Context) (bool, string) {
		h := holder(ctx)
		return h != "" && h != leader, h
	})
	took := time.Since(killed)
	t.Logf("leadership moved from %s to %s in %s (lease duration %s)", leader, holder(ctx), took.Round(10*time.Millisecond), lease)
	if took > lease+2*time.Second {
		t.Errorf("takeover took %s, want about the lease duration %s", took, lease)
	}
	mirrored("after-takeover")
	if d := e.mirrorDiff(ctx, "local"); d != "" {
		t.Errorf("mirror differs from the member after failover:\n%s", d)
	}
}
