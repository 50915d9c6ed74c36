// Package backoff is the one retry pacing of the server: exponential from
// an initial delay, doubling, with jitter, capped at 30 seconds, never
// giving up (callers stop when their context ends).
package backoff

import (
	"math"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// Cap is the longest delay between two attempts.
const Cap = 30 * time.Second

// New returns the backoff starting at initial.
func New(initial time.Duration) wait.Backoff {
	return wait.Backoff{Duration: initial, Factor: 2, Jitter: 0.2, Steps: math.MaxInt32, Cap: Cap}
}
