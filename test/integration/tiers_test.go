package integration

import (
	"sync"
	"testing"
)

// Every integration test runs in parallel (make test's -parallel): most of a
// test's time is waiting for a condition, so several stacks share the cores.
// The Makefile's SLOW_TESTS are the slow tier (make test-slow).

// faultTurn is held by the fault tests of the slow tier, one at a time.
var faultTurn sync.Mutex

// oneFaultTestAtATime runs t in parallel with the other tests but not with
// another fault test: their bounds on time (a hung primary cut within
// seconds, a failover, a grace period) are measured on a machine where the
// rest is waiting, like TestMonitoring and TestDiscoveryQuietSoak, not
// computing.
func oneFaultTestAtATime(t *testing.T) {
	t.Parallel()
	faultTurn.Lock()
	t.Cleanup(faultTurn.Unlock)
}
