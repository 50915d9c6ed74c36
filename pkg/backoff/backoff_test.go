package backoff

import (
	"testing"
	"time"
)

// TestNew: delays grow from the initial one and stay within the cap (plus
// jitter), however many attempts.
func TestNew(t *testing.T) {
	b := New(500 * time.Millisecond)
	first := b.Step()
	if first < 500*time.Millisecond || first > 600*time.Millisecond {
		t.Errorf("first delay %s, want 500ms plus at most 20%% jitter", first)
	}
	var last time.Duration
	for range 100 {
		last = b.Step()
	}
	if last < Cap || last > Cap*12/10 {
		t.Errorf("delay after 100 attempts %s, want the cap %s plus at most 20%% jitter", last, Cap)
	}
}
