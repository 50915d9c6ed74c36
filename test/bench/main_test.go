// Package bench benchmarks the platform-apiserver on a real control plane:
// its lists, gets and watches against kube-apiserver's own, discovery, the
// fleet, faults and the registry's standby. See docs/benchmarks.md for how
// to run it and what the goals are.
//
// The shared control plane is started once per test binary, by the first
// benchmark that needs it, so `go test ./...` without -bench starts nothing;
// benchmarks with an environment of their own start and stop it.
package bench

import (
	"context"
	"flag"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"
)

var profileDir = flag.String("platform-profile-dir", "",
	"write heap profiles of the platform-apiserver with the watch benchmark's watches idle and, after the benchmarks, CPU and heap profiles taken while listing NodeCapacities, to this directory")

// shared is the one environment of this test binary.
var shared struct {
	once sync.Once
	env  *env
	err  error
}

// setup returns the shared environment, starting and seeding it on first use.
// It fails the benchmark, never skips it, when the environment cannot start.
func setup(b *testing.B) *env {
	b.Helper()
	shared.once.Do(func() {
		begin := time.Now()
		// A week of history: BenchmarkRecommendation asks one.
		shared.env, shared.err = startEnv(context.Background(), envOptions{name: "shared", platformArgs: []string{"--metrics-retention=192h"}, prepare: func(ctx context.Context, e *env) error { return e.seed(ctx) }})
		if shared.err == nil {
			fmt.Fprintf(os.Stderr, "benchmark environment ready in %s\n", time.Since(begin).Round(time.Second))
		}
	})
	if shared.err != nil {
		b.Fatalf("benchmark setup: %v", shared.err)
	}
	return shared.env
}

func TestMain(m *testing.M) {
	code := m.Run()
	summary.print(os.Stdout)
	if e := shared.env; e != nil {
		if code == 0 && shared.err == nil && *profileDir != "" {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			if err := e.captureProfiles(ctx); err != nil {
				fmt.Fprintf(os.Stderr, "capture profiles: %v\n", err)
				code = 1
			}
			cancel()
		}
		// Keep the logs of a failed run for whoever reads the failure.
		keepLogs := code != 0 || shared.err != nil
		if err := e.stop(keepLogs); err != nil {
			fmt.Fprintf(os.Stderr, "stop benchmark environment: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}
