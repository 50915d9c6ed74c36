package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/example/platform-apiserver/pkg/generated/clientset/versioned"
)

// Sub-benchmarks are client=<client>/server=<server> under both BenchmarkList
// and BenchmarkGet, so `benchstat -col /server` compares the servers.
const (
	kubeSide   = "kube-apiserver-nodes"      // kube-apiserver's own Nodes
	oursSide   = "aggregated-nodecapacities" // NodeCapacities through the aggregator
	directSide = "platform-apiserver-direct" // NodeCapacities from the platform-apiserver's own port

	viaKubectl  = "kubectl"
	viaClientGo = "client-go"

	// Goals from the issue: list and get through the aggregator at most
	// 1.5× the time of kube-apiserver's own, and under 200 MiB resident.
	maxRatio  = 1.5
	maxRSSMiB = 200
)

func subName(client, server string) string { return "client=" + client + "/server=" + server }

// BenchmarkList lists all nodeCount objects of each side with kubectl
// (chunked by 500, output discarded), then with client-go (one unchunked
// JSON list); each pair runs back to back.
func BenchmarkList(b *testing.B) {
	e := setup(b)
	benchSides(b, e, "List", nodeCount, e.listMemory,
		[2][]string{{"get", "nodes", "-o", "json"}, {"get", "nodecapacities", "-o", "json"}},
		[3]func(context.Context) (int, error){e.listNodes, listNodeCapacities(e.platform), listNodeCapacities(e.direct)})
}

// BenchmarkGet gets one object, mid-list, from each side.
func BenchmarkGet(b *testing.B) {
	e := setup(b)
	benchSides(b, e, "Get", 1, func(b *testing.B) { e.reportPlatformMemory(b) },
		[2][]string{{"get", "node", getNodeName, "-o", "json"}, {"get", "nodecapacity", getNodeCapacityName, "-o", "json"}},
		[3]func(context.Context) (int, error){func(ctx context.Context) (int, error) {
			_, err := e.kube.CoreV1().Nodes().Get(ctx, getNodeName, metav1.GetOptions{})
			return 1, err
		}, getNodeCapacity(e.platform), getNodeCapacity(e.direct)})
}

// benchSides runs kubectl against kube-apiserver and ours, then client-go
// against kube-apiserver, ours and the platform-apiserver's own port (not a
// goal: it tells the aggregator's cost apart). memory follows ours.
func benchSides(b *testing.B, e *env, op string, want int, memory func(*testing.B), kubectl [2][]string, clients [3]func(context.Context) (int, error)) {
	var perOp [2][3]time.Duration // by client, then server; 0 where filtered out
	for i, server := range []string{kubeSide, oursSide} {
		b.Run(subName(viaKubectl, server), func(b *testing.B) {
			benchKubectl(b, e, want, kubectl[i]...)
			perOp[0][i] = b.Elapsed() / time.Duration(b.N)
			if i == 1 {
				memory(b)
			}
		})
	}
	for i, server := range []string{kubeSide, oursSide, directSide} {
		b.Run(subName(viaClientGo, server), func(b *testing.B) {
			benchClient(b, e, want, clients[i])
			perOp[1][i] = b.Elapsed() / time.Duration(b.N)
			switch i {
			case 1:
				memory(b)
			case 2:
				e.reportPlatformMemory(b)
			}
		})
	}
	summarizeRatios(op, perOp)
}

var listGoals = fmt.Sprintf("list and get (goal: NodeCapacity through the aggregator ≤ %.1f× kube-apiserver's Nodes; platform-apiserver ≤ %d MiB resident)", maxRatio, maxRSSMiB)

// summarizeRatios adds each client's ratio ours/kube-apiserver to the summary.
func summarizeRatios(op string, perOp [2][3]time.Duration) {
	for c, via := range []string{viaKubectl, viaClientGo} {
		kube, ours, direct := perOp[c][0], perOp[c][1], perOp[c][2]
		if kube == 0 || ours == 0 {
			continue
		}
		ratio := float64(ours) / float64(kube)
		line := fmt.Sprintf("%-4s via %-9s  kube-apiserver %10s  aggregated %10s  ratio %.2f×  %s",
			op, via, kube.Round(time.Microsecond), ours.Round(time.Microsecond), ratio, verdict(ratio <= maxRatio))
		if direct > 0 {
			line += fmt.Sprintf("  (platform-apiserver direct %s)", direct.Round(time.Microsecond))
		}
		summary.printf(listGoals, "%s", line)
	}
}

// listMemory reports the platform-apiserver's memory and adds it to the summary.
func (e *env) listMemory(b *testing.B) {
	rss, hwm := e.reportPlatformMemory(b)
	summary.printf(listGoals, "memory after %-56s VmRSS %6.1f MiB  VmHWM %6.1f MiB  %s", b.Name(), rss, hwm, verdict(hwm < maxRSSMiB))
}

// listNodes and listNodeCapacities list every object, unchunked, and count them.
func (e *env) listNodes(ctx context.Context) (int, error) {
	list, err := e.kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, err
	}
	return len(list.Items), nil
}

func listNodeCapacities(c versioned.Interface) func(context.Context) (int, error) {
	return func(ctx context.Context) (int, error) {
		list, err := c.PlatformV1alpha1().NodeCapacities().List(ctx, metav1.ListOptions{})
		if err != nil {
			return 0, err
		}
		return len(list.Items), nil
	}
}

func getNodeCapacity(c versioned.Interface) func(context.Context) (int, error) {
	return func(ctx context.Context) (int, error) {
		_, err := c.PlatformV1alpha1().NodeCapacities().Get(ctx, getNodeCapacityName, metav1.GetOptions{})
		return 1, err
	}
}

// benchKubectl times kubectl with args, output discarded, after one untimed
// call that checks the output holds want objects and warms the caches.
func benchKubectl(b *testing.B, e *env, want int, args ...string) {
	ctx := b.Context()
	var out bytes.Buffer
	must(b, e.kubectl(ctx, &out, args...))
	// The items of a List, or 1 for a single object.
	var doc struct {
		Kind  string            `json:"kind"`
		Items []json.RawMessage `json:"items"`
	}
	got := 1
	if err := json.Unmarshal(out.Bytes(), &doc); err != nil || doc.Kind == "" {
		b.Fatalf("kubectl %s: decode output (kind %q): %v", strings.Join(args, " "), doc.Kind, err)
	} else if strings.HasSuffix(doc.Kind, "List") {
		got = len(doc.Items)
	}
	if got != want {
		b.Fatalf("kubectl %s printed %d objects, want %d", strings.Join(args, " "), got, want)
	}
	for b.Loop() {
		must(b, e.kubectl(ctx, io.Discard, args...))
	}
	b.ReportMetric(float64(want), "items/op")
}

// benchClient times op, which returns how many objects it received, after
// one untimed warm-up call.
func benchClient(b *testing.B, e *env, want int, op func(context.Context) (int, error)) {
	ctx := b.Context()
	_, err := op(ctx)
	must(b, err)
	items := 0
	for b.Loop() {
		got, err := op(ctx)
		must(b, err)
		if got != want {
			b.Fatalf("received %d objects, want %d", got, want)
		}
		items += got
	}
	b.ReportMetric(float64(items)/float64(b.N), "items/op")
}

// reportPlatformMemory reports the platform-apiserver's VmRSS (rss-MiB) and
// VmHWM (hwm-MiB) and returns them.
func (e *env) reportPlatformMemory(b *testing.B) (rssMiB, hwmMiB float64) {
	rss, hwm, err := e.platformMemory()
	must(b, err)
	rssMiB, hwmMiB = float64(rss)/mib, float64(hwm)/mib
	b.ReportMetric(rssMiB, "rss-MiB")
	b.ReportMetric(hwmMiB, "hwm-MiB")
	return rssMiB, hwmMiB
}
