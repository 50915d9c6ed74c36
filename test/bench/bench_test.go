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

// Sub-benchmarks are named client=<client>/server=<server>, the same under
// BenchmarkList and BenchmarkGet, so that `benchstat -col /server` puts the
// servers side by side and computes the ratio to kube-apiserver's own.
const (
	kubeSide   = "kube-apiserver-nodes"      // kube-apiserver's own Nodes
	oursSide   = "aggregated-nodecapacities" // NodeCapacities through the aggregator
	directSide = "platform-apiserver-direct" // NodeCapacities from the platform-apiserver's own port

	viaKubectl  = "kubectl"
	viaClientGo = "client-go"
)

// subName is the sub-benchmark name of a client and server.
func subName(client, server string) string { return "client=" + client + "/server=" + server }

// BenchmarkList lists all nodeCount objects of each side, first with kubectl
// (as a user would, chunked by 500, output discarded), then with client-go
// (one unchunked JSON list, decoded into typed objects). Each pair runs back
// to back so both see the same machine load.
func BenchmarkList(b *testing.B) {
	e := setup(b)
	b.Run(subName(viaKubectl, kubeSide), func(b *testing.B) {
		benchKubectl(b, e, nodeCount, "get", "nodes", "-o", "json")
	})
	b.Run(subName(viaKubectl, oursSide), func(b *testing.B) {
		benchKubectl(b, e, nodeCount, "get", "nodecapacities", "-o", "json")
		e.listMemory(b)
	})
	b.Run(subName(viaClientGo, kubeSide), func(b *testing.B) {
		benchClient(b, e, nodeCount, func(ctx context.Context) (int, error) {
			list, err := e.kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
			if err != nil {
				return 0, err
			}
			return len(list.Items), nil
		})
	})
	b.Run(subName(viaClientGo, oursSide), func(b *testing.B) {
		benchClient(b, e, nodeCount, listNodeCapacities(e.platform))
		e.listMemory(b)
	})
	// Not a goal: tells the aggregator's proxying apart from our own cost.
	b.Run(subName(viaClientGo, directSide), func(b *testing.B) {
		benchClient(b, e, nodeCount, listNodeCapacities(e.direct))
		e.reportPlatformMemory(b)
	})
	summarizeRatios("List")
}

// BenchmarkGet gets one object, mid-list, from each side.
func BenchmarkGet(b *testing.B) {
	e := setup(b)
	b.Run(subName(viaKubectl, kubeSide), func(b *testing.B) {
		benchKubectl(b, e, 1, "get", "node", getNodeName, "-o", "json")
	})
	b.Run(subName(viaKubectl, oursSide), func(b *testing.B) {
		benchKubectl(b, e, 1, "get", "nodecapacity", getNodeCapacityName, "-o", "json")
		e.reportPlatformMemory(b)
	})
	b.Run(subName(viaClientGo, kubeSide), func(b *testing.B) {
		benchClient(b, e, 1, func(ctx context.Context) (int, error) {
			_, err := e.kube.CoreV1().Nodes().Get(ctx, getNodeName, metav1.GetOptions{})
			return 1, err
		})
	})
	b.Run(subName(viaClientGo, oursSide), func(b *testing.B) {
		benchClient(b, e, 1, getNodeCapacity(e.platform))
		e.reportPlatformMemory(b)
	})
	b.Run(subName(viaClientGo, directSide), func(b *testing.B) {
		benchClient(b, e, 1, getNodeCapacity(e.direct))
		e.reportPlatformMemory(b)
	})
	summarizeRatios("Get")
}

// Goals from the issue: list and get through the aggregator at most 1.5× the
// time of kube-apiserver's own, and the platform-apiserver under 200 MiB
// resident with nodeCount nodes in the registry.
const (
	maxRatio  = 1.5
	maxRSSMiB = 200
)

var listGoals = fmt.Sprintf("list and get (goal: NodeCapacity through the aggregator ≤ %.1f× kube-apiserver's Nodes; platform-apiserver ≤ %d MiB resident)", maxRatio, maxRSSMiB)

// summarizeRatios adds the ratio ours/kube-apiserver of each client of
// Benchmark<op> to the summary.
func summarizeRatios(op string) {
	for _, via := range []string{viaKubectl, viaClientGo} {
		prefix := "Benchmark" + op + "/"
		kube, okKube := summary.op(prefix + subName(via, kubeSide))
		ours, okOurs := summary.op(prefix + subName(via, oursSide))
		if !okKube || !okOurs {
			continue
		}
		ratio := float64(ours) / float64(kube)
		line := fmt.Sprintf("%-4s via %-9s  kube-apiserver %10s  aggregated %10s  ratio %.2f×  %s",
			op, via, kube.Round(time.Microsecond), ours.Round(time.Microsecond), ratio, verdict(ratio <= maxRatio))
		if direct, ok := summary.op(prefix + subName(via, directSide)); ok {
			line += fmt.Sprintf("  (platform-apiserver direct %s)", direct.Round(time.Microsecond))
		}
		summary.printf(listGoals, "%s", line)
	}
}

// listMemory reports the platform-apiserver's memory after a list of ours
// and adds it to the summary against the goal.
func (e *env) listMemory(b *testing.B) {
	rss, hwm := e.reportPlatformMemory(b)
	summary.printf(listGoals, "memory after %-56s VmRSS %6.1f MiB  VmHWM %6.1f MiB  %s", b.Name(), rss, hwm, verdict(hwm < maxRSSMiB))
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

// benchKubectl times kubectl with args, its output discarded. One untimed
// call first checks that the output holds want objects and warms kubectl's
// discovery cache and the servers.
func benchKubectl(b *testing.B, e *env, want int, args ...string) {
	ctx := b.Context()
	var out bytes.Buffer
	if err := e.kubectl(ctx, &out, args...); err != nil {
		b.Fatal(err)
	}
	got, err := countObjects(out.Bytes())
	if err != nil {
		b.Fatalf("kubectl %s: %v", strings.Join(args, " "), err)
	}
	if got != want {
		b.Fatalf("kubectl %s printed %d objects, want %d", strings.Join(args, " "), got, want)
	}
	for b.Loop() {
		if err := e.kubectl(ctx, io.Discard, args...); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(want), "items/op")
	summary.recordOp(b)
}

// benchClient times op, which returns how many objects it received. One
// untimed call first warms connections and the servers.
func benchClient(b *testing.B, e *env, want int, op func(context.Context) (int, error)) {
	ctx := b.Context()
	if _, err := op(ctx); err != nil {
		b.Fatal(err)
	}
	items := 0
	for b.Loop() {
		got, err := op(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if got != want {
			b.Fatalf("received %d objects, want %d", got, want)
		}
		items += got
	}
	b.ReportMetric(float64(items)/float64(b.N), "items/op")
	summary.recordOp(b)
}

// reportPlatformMemory reports the platform-apiserver's resident set size now
// (rss-MiB) and its peak since start (hwm-MiB), and returns them.
func (e *env) reportPlatformMemory(b *testing.B) (rssMiB, hwmMiB float64) {
	rss, hwm, err := e.platformMemory()
	if err != nil {
		b.Fatal(err)
	}
	rssMiB, hwmMiB = float64(rss)/mib, float64(hwm)/mib
	b.ReportMetric(rssMiB, "rss-MiB")
	b.ReportMetric(hwmMiB, "hwm-MiB")
	return rssMiB, hwmMiB
}

// countObjects counts the objects in kubectl's JSON output: the items of a
// List, or 1 for a single object.
func countObjects(out []byte) (int, error) {
	var doc struct {
		Kind  string            `json:"kind"`
		Items []json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal(out, &doc); err != nil {
		return 0, fmt.Errorf("decode output: %w", err)
	}
	if doc.Kind == "" {
		return 0, fmt.Errorf("output has no kind")
	}
	if strings.HasSuffix(doc.Kind, "List") {
		return len(doc.Items), nil
	}
	return 1, nil
}
