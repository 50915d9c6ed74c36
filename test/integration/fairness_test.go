package integration

import (
	"bufio"
	"cmp"
	"context"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"

	"github.com/example/platform-apiserver/pkg/generated/clientset/versioned"
	"github.com/example/platform-apiserver/test/framework"
)

const (
	// apfLevel is the FlowSchema and PriorityLevelConfiguration the test
	// puts the flooding user in, as an operator would a noisy tenant.
	apfLevel = "platform-test-flooder"
	// apfFlooders is how many lists the flooder keeps in flight.
	apfFlooders = 12
	// apfShares is the level's nominal concurrency shares: of the default
	// levels' 245 shares plus these, kube-apiserver's 600 seats give it 15
	// (at least apfFlooders, so kube-apiserver's own APF never queues the
	// flooder) and platform-apiserver's 40 give it 1.
	apfShares = 6
	// apfSamples is how many lists the other user times in each phase
	// of a round, apfRounds the rounds of an unloaded and a loaded phase.
	apfSamples  = 100
	apfRounds   = 4
	apfAttempts = 3
)

// testPriorityAndFairness: with one user flooding lists through the
// aggregator, another user's list p99 stays within 3x its unloaded p99,
// because platform-apiserver's own priority and fairness, following the
// hosting cluster's FlowSchemas, queues the flood in its own level. The
// flooder's level has more seats in kube-apiserver than it has requests
// in flight, so the queueing is platform-apiserver's (checked on both
// servers' metrics); a last phase gives the level enough seats in
// platform-apiserver too, which is how the server behaves without its own
// APF, and reports what the victim sees then.
func (e *env) testPriorityAndFairness(t *testing.T) {
	ctx := t.Context()
	victim, flooder := e.apfUsers(t)
	e.createFlooderLevel(t)
	if err := e.waitFlooderClassified(ctx, flooder); err != nil {
		t.Fatal(err)
	}

	if _, err := timedLists(ctx, victim, 20); err != nil { // warm caches and connections
		t.Fatal(err)
	}
	// The bound holds in the best of apfAttempts measurements: on a shared
	// 2-core machine other processes' CPU alone spikes one client's p99
	// now and then (seen: 1.3-5.9x with the flood queued here), while a
	// flood not queued here costs 3.6-12x every time (the last phase).
	var limited floodRun
	for attempt := 1; ; attempt++ {
		var err error
		if limited, err = e.measureFlood(ctx, victim, flooder, apfRounds, apfSamples, true); err != nil {
			t.Fatal(err)
		}
		t.Logf("victim list latency (attempt %d): %s", attempt, limited)
		p99l, p99u := p99(limited.loaded), p99(limited.unloaded)
		if p99l <= 3*p99u {
			break
		}
		if attempt == apfAttempts {
			t.Errorf("victim list p99 under the flood %s, more than 3x its unloaded %s, in each of %d attempts", p99l, p99u, apfAttempts)
			break
		}
	}
	if limited.kubeWait*10 > limited.ownWait {
		t.Errorf("the flood waited %s in kube-apiserver's APF and %s in platform-apiserver's: the test means to measure the second",
			limited.kubeWait, limited.ownWait)
	}
	body, err := e.cp.PlatformMetrics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, labels := range [][]string{{`flow_schema="` + apfLevel + `"`}, {`priority_level="global-default"`}} {
		if n, _ := framework.MetricSum(body, "apiserver_flowcontrol_dispatched_requests_total", labels...); n == 0 {
			t.Errorf("platform-apiserver's /metrics has no apiserver_flowcontrol_dispatched_requests_total%v", labels)
		}
	}

	// The same flood when the level has seats for all of it, as without
	// platform-apiserver's APF: reported, not asserted.
	if err := e.setFlooderShares(ctx, 1000); err != nil {
		t.Fatal(err)
	}
	unlimited, err := e.measureFlood(ctx, victim, flooder, 1, apfSamples, false)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("victim list latency with the flood not queued by platform-apiserver: %s", unlimited)
}

// floodRun is what measureFlood saw: the victim's list latencies without
// and with the flood, and the flood's side.
type floodRun struct {
	unloaded, loaded []time.Duration
	floods           int64 // flooder lists answered
	queued           int   // most flooder lists seen queued in platform-apiserver's APF
	// kubeWait and ownWait are how long the flooder's lists waited in all
	// in kube-apiserver's APF and in platform-apiserver's.
	kubeWait, ownWait time.Duration
	floodErr          error
}

func (r floodRun) String() string {
	s := fmt.Sprintf("unloaded p50 %s p99 %s, loaded p50 %s p99 %s (p99 %.1fx) with %d flooder lists in %s; they waited %s in all in platform-apiserver's APF (at most %d at once), %s in kube-apiserver's",
		percentile(r.unloaded, 0.5), p99(r.unloaded), percentile(r.loaded, 0.5), p99(r.loaded), ratio(p99(r.loaded), p99(r.unloaded)),
		r.floods, sum(r.loaded).Round(time.Millisecond), r.ownWait.Round(time.Millisecond), r.queued, r.kubeWait.Round(time.Millisecond))
	if r.floodErr != nil {
		s += fmt.Sprintf(" (flooder error: %v)", r.floodErr)
	}
	return s
}

// measureFlood times samples victim lists without and then with the flood,
// rounds times: the phases alternate so that the machine's own noise
// (other processes on a shared runner) falls on both alike. With queued,
// each loaded phase starts once platform-apiserver's APF queues the flood.
func (e *env) measureFlood(ctx context.Context, victim, flooder versioned.Interface, rounds, samples int, queued bool) (floodRun, error) {
	var r floodRun
	for range rounds {
		u, err := timedLists(ctx, victim, samples)
		if err != nil {
			return r, err
		}
		r.unloaded = append(r.unloaded, u...)
		stop := flood(ctx, flooder, apfFlooders)
		if queued {
			q, err := e.waitFlooderQueued(ctx)
			if err != nil {
				_, _ = stop()
				return r, err
			}
			r.queued = max(r.queued, q)
		}
		kubeBefore, ownBefore, err := e.apfWaits(ctx)
		if err != nil {
			_, _ = stop()
			return r, err
		}
		l, err := timedLists(ctx, victim, samples)
		kubeAfter, ownAfter, waitErr := e.apfWaits(ctx)
		n, floodErr := stop()
		if err = cmp.Or(err, waitErr); err != nil {
			return r, err
		}
		r.loaded = append(r.loaded, l...)
		r.floods += n
		r.kubeWait += kubeAfter - kubeBefore
		r.ownWait += ownAfter - ownBefore
		r.floodErr = cmp.Or(r.floodErr, floodErr)
	}
	return r, nil
}

// apfUsers returns clients of two users who may list NodeCapacities,
// without client-side rate limits.
func (e *env) apfUsers(t *testing.T) (victim, flooder versioned.Interface) {
	t.Helper()
	ctx := t.Context()
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "apf-test-reader"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{"platform.example.io"}, Resources: []string{"nodecapacities"}, Verbs: []string{"list"}}},
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "apf-test-reader"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{
			{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: "apf-victim"},
			{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: "apf-flooder"},
		},
	}
	if _, err := e.kube.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.kube.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx := context.WithoutCancel(ctx)
		_ = e.kube.RbacV1().ClusterRoleBindings().Delete(ctx, binding.Name, metav1.DeleteOptions{})
		_ = e.kube.RbacV1().ClusterRoles().Delete(ctx, role.Name, metav1.DeleteOptions{})
	})
	clients := make([]versioned.Interface, 2)
	for i, name := range []string{"apf-victim", "apf-flooder"} {
		cfg, _, err := e.cp.UserConfig(name)
		if err != nil {
			t.Fatal(err)
		}
		cfg.QPS = -1 // no client-side limit: the servers decide
		clients[i] = versioned.NewForConfigOrDie(cfg)
		if err := pollAllowed(ctx, func() error {
			_, err := clients[i].PlatformV1alpha1().NodeCapacities().List(ctx, metav1.ListOptions{})
			return err
		}); err != nil {
			t.Fatalf("%s listing: %v", name, err)
		}
	}
	return clients[0], clients[1]
}

// createFlooderLevel puts the user apf-flooder in a priority level of its
// own with apfShares and no borrowing, queueing what exceeds its seats.
func (e *env) createFlooderLevel(t *testing.T) {
	t.Helper()
	ctx := t.Context()
	zero := int32(0)
	shares := int32(apfShares)
	plc := &flowcontrolv1.PriorityLevelConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: apfLevel},
		Spec: flowcontrolv1.PriorityLevelConfigurationSpec{
			Type: flowcontrolv1.PriorityLevelEnablementLimited,
			Limited: &flowcontrolv1.LimitedPriorityLevelConfiguration{
				NominalConcurrencyShares: &shares,
				LendablePercent:          &zero,
				BorrowingLimitPercent:    &zero,
				LimitResponse: flowcontrolv1.LimitResponse{
					Type:    flowcontrolv1.LimitResponseTypeQueue,
					Queuing: &flowcontrolv1.QueuingConfiguration{Queues: 8, HandSize: 2, QueueLengthLimit: 100},
				},
			},
		},
	}
	fs := &flowcontrolv1.FlowSchema{
		ObjectMeta: metav1.ObjectMeta{Name: apfLevel},
		Spec: flowcontrolv1.FlowSchemaSpec{
			PriorityLevelConfiguration: flowcontrolv1.PriorityLevelConfigurationReference{Name: apfLevel},
			MatchingPrecedence:         500,
			DistinguisherMethod:        &flowcontrolv1.FlowDistinguisherMethod{Type: flowcontrolv1.FlowDistinguisherMethodByUserType},
			Rules: []flowcontrolv1.PolicyRulesWithSubjects{{
				Subjects: []flowcontrolv1.Subject{{Kind: flowcontrolv1.SubjectKindUser, User: &flowcontrolv1.UserSubject{Name: "apf-flooder"}}},
				ResourceRules: []flowcontrolv1.ResourcePolicyRule{{
					Verbs: []string{"*"}, APIGroups: []string{"*"}, Resources: []string{"*"},
					ClusterScope: true, Namespaces: []string{"*"},
				}},
			}},
		},
	}
	if _, err := e.kube.FlowcontrolV1().PriorityLevelConfigurations().Create(ctx, plc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.kube.FlowcontrolV1().FlowSchemas().Create(ctx, fs, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx := context.WithoutCancel(ctx)
		_ = e.kube.FlowcontrolV1().FlowSchemas().Delete(ctx, apfLevel, metav1.DeleteOptions{})
		_ = e.kube.FlowcontrolV1().PriorityLevelConfigurations().Delete(ctx, apfLevel, metav1.DeleteOptions{})
	})
}

// waitFlooderClassified waits until platform-apiserver dispatches the
// flooder's lists in its level, with one seat.
func (e *env) waitFlooderClassified(ctx context.Context, flooder versioned.Interface) error {
	var last string
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		if _, err := flooder.PlatformV1alpha1().NodeCapacities().List(ctx, metav1.ListOptions{}); err != nil {
			return false, err
		}
		body, err := e.cp.PlatformMetrics(ctx)
		if err != nil {
			return false, err
		}
		dispatched, _ := framework.MetricSum(body, "apiserver_flowcontrol_dispatched_requests_total", `priority_level="`+apfLevel+`"`)
		seats, _ := framework.MetricSum(body, "apiserver_flowcontrol_nominal_limit_seats", `priority_level="`+apfLevel+`"`)
		last = fmt.Sprintf("dispatched %v, nominal seats %v", dispatched, seats)
		return dispatched > 0 && seats == 1, nil
	})
	if err != nil {
		return fmt.Errorf("platform-apiserver never put the flooder in priority level %s (%s): %w", apfLevel, last, err)
	}
	return nil
}

// waitFlooderQueued waits until platform-apiserver's APF holds flooder
// lists in the level's queues and returns how many it saw at once.
func (e *env) waitFlooderQueued(ctx context.Context) (int, error) {
	var queued float64
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		body, err := e.cp.PlatformMetrics(ctx)
		if err != nil {
			return false, err
		}
		queued, _ = framework.MetricSum(body, "apiserver_flowcontrol_current_inqueue_requests", `priority_level="`+apfLevel+`"`)
		return queued > 0, nil
	})
	if err != nil {
		return 0, fmt.Errorf("platform-apiserver's APF never queued the flooder's lists: %w", err)
	}
	return int(queued), nil
}

// apfWaits returns how long kube-apiserver's APF and platform-apiserver's
// have made the flooder's level wait in all.
func (e *env) apfWaits(ctx context.Context) (kube, own time.Duration, err error) {
	kubeBody, err := e.kube.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return 0, 0, fmt.Errorf("kube-apiserver /metrics: %w", err)
	}
	ownBody, err := e.cp.PlatformMetrics(ctx)
	if err != nil {
		return 0, 0, err
	}
	wait := func(body string) (time.Duration, error) {
		s, err := framework.MetricSum(body, "apiserver_flowcontrol_request_wait_duration_seconds_sum", `priority_level="`+apfLevel+`"`)
		return time.Duration(s * float64(time.Second)), err
	}
	kube, err = wait(string(kubeBody))
	if err != nil {
		return 0, 0, err
	}
	own, err = wait(ownBody)
	return kube, own, err
}

// setFlooderShares changes the flooder level's shares and waits until
// platform-apiserver gives it at least apfFlooders seats.
func (e *env) setFlooderShares(ctx context.Context, shares int32) error {
	plc, err := e.kube.FlowcontrolV1().PriorityLevelConfigurations().Get(ctx, apfLevel, metav1.GetOptions{})
	if err != nil {
		return err
	}
	plc.Spec.Limited.NominalConcurrencyShares = &shares
	if _, err := e.kube.FlowcontrolV1().PriorityLevelConfigurations().Update(ctx, plc, metav1.UpdateOptions{}); err != nil {
		return err
	}
	return wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		body, err := e.cp.PlatformMetrics(ctx)
		if err != nil {
			return false, err
		}
		seats, _ := framework.MetricSum(body, "apiserver_flowcontrol_nominal_limit_seats", `priority_level="`+apfLevel+`"`)
		return seats >= apfFlooders, nil
	})
}

// flood lists NodeCapacities from n goroutines as fast as the servers
// answer until the returned stop is called, which returns how many lists
// were answered and the first error other than the stop. It reads the
// answers without decoding them: the flooder shares this process with the
// victim, whose latency should not include the flooder's decoding and
// garbage.
func flood(ctx context.Context, client versioned.Interface, n int) (stop func() (int64, error)) {
	ctx, cancel := context.WithCancel(ctx)
	var (
		wg       sync.WaitGroup
		answered atomic.Int64
		mu       sync.Mutex
		first    error
	)
	for range n {
		wg.Go(func() {
			for ctx.Err() == nil {
				err := client.PlatformV1alpha1().RESTClient().Get().Resource("nodecapacities").Do(ctx).Error()
				switch {
				case err == nil:
					answered.Add(1)
				case ctx.Err() == nil:
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			}
		})
	}
	return func() (int64, error) {
		cancel()
		wg.Wait()
		return answered.Load(), first
	}
}

// timedLists lists NodeCapacities n times, one after the other, and
// returns each list's latency.
func timedLists(ctx context.Context, client versioned.Interface, n int) ([]time.Duration, error) {
	out := make([]time.Duration, 0, n)
	for range n {
		start := time.Now()
		l, err := client.PlatformV1alpha1().NodeCapacities().List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		if len(l.Items) != fixtureNodes {
			return nil, fmt.Errorf("listed %d NodeCapacities, want %d", len(l.Items), fixtureNodes)
		}
		out = append(out, time.Since(start))
	}
	return out, nil
}

func p99(d []time.Duration) time.Duration { return percentile(d, 0.99) }

func percentile(d []time.Duration, q float64) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[int(math.Ceil(q*float64(len(s))))-1]
}

func sum(d []time.Duration) time.Duration {
	var total time.Duration
	for _, v := range d {
		total += v
	}
	return total
}

func ratio(a, b time.Duration) float64 { return float64(a) / float64(b) }

// testProfiling: /debug/pprof is served by default to whom RBAC allows
// and refused to others; --profiling=false turns it off (404 even for the
// admin); --debug-socket-path serves it on a unix socket without
// credentials, and --contention-profiling fills its block profile.
func (e *env) testProfiling(t *testing.T) {
	ctx := t.Context()
	admin, err := rest.HTTPClientFor(e.cp.PlatformDirectConfig())
	if err != nil {
		t.Fatal(err)
	}
	if code, body, err := getURL(ctx, admin, e.cp.PlatformServerURL()+"/debug/pprof/"); err != nil || code != http.StatusOK || !strings.Contains(body, "goroutine") {
		t.Errorf("admin GET /debug/pprof/ with the default --profiling: %d %v\n%.300s", code, err, body)
	}
	if code, body, err := getURL(ctx, admin, e.cp.PlatformServerURL()+"/debug/pprof/block?debug=1"); err != nil || code != http.StatusOK || hasBlockSamples(body) {
		t.Errorf("block profile without --contention-profiling: %d %v, want 200 and no samples:\n%.300s", code, err, body)
	}
	nobody, _, err := e.cp.UserConfig("pprof-nobody")
	if err != nil {
		t.Fatal(err)
	}
	nobody.Host, nobody.CAData = e.cp.PlatformServerURL(), e.cp.PlatformServingCA()
	unauthorized, err := rest.HTTPClientFor(nobody)
	if err != nil {
		t.Fatal(err)
	}
	if code, _, err := getURL(ctx, unauthorized, e.cp.PlatformServerURL()+"/debug/pprof/"); err != nil || code != http.StatusForbidden {
		t.Errorf("GET /debug/pprof/ by a user without RBAC: %d %v, want 403", code, err)
	}

	dir, err := os.MkdirTemp("", "pprof") // short: a socket path has at most 107 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	socket := filepath.Join(dir, "debug.sock")
	replica, err := e.cp.StartFleetReplica(ctx, "platform-apiserver-no-profiling",
		[]string{"--profiling=false", "--contention-profiling", "--debug-socket-path=" + socket}, platformReplicaReady)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = replica.Stop() })
	for _, path := range []string{"/debug/pprof/", "/debug/pprof/heap"} {
		if code, _, err := getURL(ctx, admin, replica.URL()+path); err != nil || code != http.StatusNotFound {
			t.Errorf("admin GET %s with --profiling=false: %d %v, want 404", path, code, err)
		}
	}
	local := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", socket)
		},
	}}
	if code, body, err := getURL(ctx, local, "http://socket/debug/pprof/"); err != nil || code != http.StatusOK || !strings.Contains(body, "goroutine") {
		t.Errorf("GET /debug/pprof/ on --debug-socket-path: %d %v\n%.300s", code, err, body)
	}
	var body string
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		var code int
		code, body, err = getURL(ctx, local, "http://socket/debug/pprof/block?debug=1")
		return err == nil && code == http.StatusOK && hasBlockSamples(body), nil
	}); err != nil {
		t.Errorf("block profile on the socket with --contention-profiling has no samples: %v\n%.300s", err, body)
	}
}

// platformReplicaReady bounds a fleet replica's start.
const platformReplicaReady = 2 * time.Minute

// hasBlockSamples tells whether a block profile in text form (debug=1)
// holds a sample: a line "<cycles> <count> @ <pcs>".
func hasBlockSamples(profile string) bool {
	sc := bufio.NewScanner(strings.NewReader(profile))
	for sc.Scan() {
		if strings.Contains(sc.Text(), " @ ") {
			return true
		}
	}
	return false
}

// getURL GETs url with client and returns the status and body.
func getURL(ctx context.Context, client *http.Client, url string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, "", err
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}
