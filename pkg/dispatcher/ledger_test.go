package dispatcher

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func TestLedger(t *testing.T) {
	t0 := time.Unix(1000, 0)
	var never time.Time // the mirror current
	l := &Ledger{Settle: 10 * time.Second, Expiry: time.Minute}
	cpu := func(s string) corev1.ResourceList { return corev1.ResourceList{"cpu": resource.MustParse(s)} }
	l.Promise("a", "m1", cpu("2"), t0)
	l.Promise("b", "m1", cpu("3"), t0)
	l.Promise("c", "m2", cpu("7"), t0)
	check := func(what string, got corev1.ResourceList, want string) {
		t.Helper()
		q := got["cpu"]
		if q.Cmp(resource.MustParse(want)) != 0 {
			t.Errorf("%s: %s, want %s", what, q.String(), want)
		}
	}
	check("m1", l.InFlight("m1", "", t0, never), "5")
	check("m1 without a", l.InFlight("m1", "a", t0, never), "3")
	l.Admitted("a", t0.Add(5*time.Second))
	check("a admitted, within settle", l.InFlight("m1", "", t0.Add(14*time.Second), never), "5")
	check("a settled", l.InFlight("m1", "", t0.Add(15*time.Second), never), "3")
	check("a settled, but m1's mirror stale since before it could show a's pods: held", l.InFlight("m1", "", t0.Add(15*time.Second), t0.Add(12*time.Second)), "5")
	check("a settled, m1's mirror stale only since after it showed a's pods", l.InFlight("m1", "", t0.Add(40*time.Second), t0.Add(30*time.Second)), "3")
	l.Release("b")
	check("b released", l.InFlight("m1", "", t0.Add(15*time.Second), never), "0")
	if n := l.Len(t0.Add(59 * time.Second)); n != 1 {
		t.Errorf("held at 59 s: %d, want 1 (c)", n)
	}
	check("c expired", l.InFlight("m2", "", t0.Add(time.Minute), t0), "0")
	check("a expired, the mirror stale all along", l.InFlight("m1", "", t0.Add(time.Minute), t0), "0")
	l.Promise("a", "m2", cpu("1"), t0)
	l.Promise("a", "m1", cpu("4"), t0)
	check("a nominated again elsewhere", l.InFlight("m2", "", t0, never), "0")
	check("a's new promise", l.InFlight("m1", "", t0, never), "4")
}
