package app

import (
	"strings"
	"testing"
	"time"

	utilerrors "k8s.io/apimachinery/pkg/util/errors"
)

// Bad flags are refused, each naming the flag and what it takes; the
// defaults pass.
func TestValidate(t *testing.T) {
	if errs := NewOptions().Validate(); len(errs) > 0 {
		t.Fatalf("defaults refused: %v", errs)
	}
	o := NewOptions()
	o.WhenNothingFits = "sometimes"
	o.MaxDataAge = 0
	o.NominationTimeout = -time.Second
	o.Workers = 0
	o.QPS = 0
	msg := utilerrors.NewAggregate(o.Validate()).Error()
	for _, want := range []string{
		`--when-nothing-fits="sometimes": want wait or most-room`,
		"--max-data-age=0s: want a positive duration",
		"--nomination-timeout=-1s: want a positive duration",
		"--workers=0: want at least 1",
		"--kube-api-qps=0",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("%q missing from %s", want, msg)
		}
	}
	if c := NewOptions().Config(); c.WhenNothingFits != "wait" || c.NominationTimeout != 2*time.Minute || c.Settle != 15*time.Second {
		t.Errorf("defaults' config: %+v", c)
	}
}
