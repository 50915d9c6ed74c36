package main

import (
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestExtractSpans(t *testing.T) {
	text := strings.Join([]string{
		"Intro with `one` and `two`.",    // 1
		"",                               // 2
		"A span `across",                 // 3
		"    lines` and ``a ` b`` here.", // 4
		"",                               // 5
		"```sh",                          // 6
		"`not a span` in a fence",        // 7
		"```",                            // 8
		"  - item `make",                 // 9
		"    generate`, \\`escaped\\`",   // 10
		"   ~~~",                         // 11
		"   `fenced too`",                // 12
		"   ~~~",                         // 13
		"an `unclosed span",              // 14
		"",                               // 15
		"ends here `last`",               // 16
	}, "\n")
	want := []span{
		{1, "one"}, {1, "two"}, {3, "across lines"}, {4, "a ` b"}, {9, "make generate"}, {16, "last"},
	}
	if got := extractSpans(text); !reflect.DeepEqual(got, want) {
		t.Errorf("extractSpans:\ngot  %v\nwant %v", got, want)
	}
}

func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		tok  string
		want []ref
	}{
		// Go identifiers, qualified or not.
		{"store.Writer.ClaimMember", []ref{{kindPath, "store.Writer.ClaimMember"}}},
		{"Store.RecordNodeMetrics", []ref{{kindGo, "Store.RecordNodeMetrics"}}},
		{"ClaimMember(cluster, owner)", []ref{{kindGo, "ClaimMember"}}},
		{"store.Records[R]", []ref{{kindPath, "store.Records"}}},
		{"Value()", []ref{{kindGo, "Value"}}},
		{"ErrFenced", []ref{{kindGo, "ErrFenced"}}},
		{"awaitFirstSyncs", []ref{{kindGo, "awaitFirstSyncs"}}},
		{"TestMemberFreshness", []ref{{kindTest, "TestMemberFreshness"}}},
		{"TestReadPath/priority_and_fairness", []ref{{kindTest, "TestReadPath"}}},
		{"BenchmarkGet/...", []ref{{kindTest, "BenchmarkGet"}}},
		// Flags.
		{"--member-stale-after", []ref{{kindFlag, "--member-stale-after"}}},
		{"--member-stale-after=2m", []ref{{kindFlag, "--member-stale-after"}}},
		{"--leader-elect-*", []ref{{kindFlag, "--leader-elect-*"}}},
		{"-fleet-scale=MEMBERSxNODES", []ref{{kindFlag, "-fleet-scale"}}},
		// Metrics, anywhere in a span.
		{"platform_discovery_relists_total{reason}", []ref{{kindMetric, "platform_discovery_relists_total"}}},
		{"time() - platform_watch_feed_last_read_timestamp_seconds", []ref{{kindMetric, "platform_watch_feed_last_read_timestamp_seconds"}}},
		{"platform_registry_writer_lock_*", []ref{{kindMetric, "platform_registry_writer_lock_*"}}},
		// SQL.
		{"registry_wait_tickets", []ref{{kindSQL, "registry_wait_tickets"}}},
		{"cluster_capacity.complete_as_of", []ref{{kindSQL, "cluster_capacity.complete_as_of"}}},
		{"registry_define_log_update(table, kind)", []ref{{kindSQL, "registry_define_log_update"}}},
		{"apply_absent_*", []ref{{kindSQL, "apply_absent_*"}}},
		// Files.
		{"pkg/registry/staleness.go", []ref{{kindFile, "pkg/registry/staleness.go"}}},
		{"pkg/registry/staleness.go:42", []ref{{kindFile, "pkg/registry/staleness.go"}}},
		{"docs/faults.md#member-outage", []ref{{kindFile, "docs/faults.md"}}},
		{"pkg/registry/postgres", []ref{{kindFile, "pkg/registry/postgres"}}},
		{"view_<kind>.go", []ref{{kindFile, "view_<kind>.go"}}},
		{"files/alerts_test.yaml", []ref{{kindFile, "files/alerts_test.yaml"}}},
		// Make targets.
		{"make test-slow", []ref{{kindMake, "test-slow"}}},
		// Not names this check knows: left alone.
		{"kubectl get nodecapacities -o wide", nil},
		{"status", nil},
		{"1h", nil},
		{"410 Gone", nil},
		{"-n", nil},
		{"-bench", nil},
		{"/debug/pprof", nil},
		{"_output/bin/kubectl-platform", nil},
		{".down.sql", nil},
		{"resource.k8s.io", nil},
		{"metrics.k8s.io", nil},
		{"pkg/registry/postgres/migrations/NNN_name.{up,down}.sql", nil},
		{"pkg/registry/postgres/migrations/0NN_*.up.sql", nil},
		{"make X", nil},
		{"<cluster id>.<node>", nil},
		{"cluster_node_metrics_pYYYYMMDDHH", nil},
		{"sslmode=verify-full", nil},
		{"platform.example.io/v1alpha1", nil},
		{"NOT EXISTS", nil},
	} {
		if got := classify(tc.tok); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("classify(%q) = %v, want %v", tc.tok, got, tc.want)
		}
	}
}

// fixture writes a small repository: Go code, SQL, a Makefile, artifacts
// and docs.
func fixture(t *testing.T, docs map[string]string, known string) string {
	t.Helper()
	root := t.TempDir()
	files := map[string]string{
		"go.mod": "module example.com/fixture\n\ngo 1.26\n",
		"Makefile": "verify:\n\thack/verify.sh\n\n## test-slow: the slow tier\ntest-slow: deps\n\tgo test\n" +
			"X := y\n",
		"pkg/registry/store/store.go": `package store

// Writer writes.
type Writer interface {
	Reader
	ClaimMember(cluster, owner string) error
}

type Reader interface{ Changes() }

type Node struct {
	Status              string ` + "`json:\"status\"`" + `
	UnschedulableReason string ` + "`json:\"unschedulableReason,omitempty\"`" + `
}

const ErrFenced = "fenced"

func MemberStaleness() {}
`,
		"pkg/registry/staleness.go": `package registry

import "time"

type syncer struct{}

func (s *syncer) awaitFirstSyncs() { _ = time.Second }
`,
		"pkg/registry/staleness_test.go": "package registry\n\nimport \"testing\"\n\nfunc TestMemberFreshness(t *testing.T) {}\n",
		"pkg/registry/postgres/instrumentation.go": `package postgres

import (
	"k8s.io/component-base/metrics"
)

const metricsSubsystem = "platform_registry"

var waits = metrics.NewHistogramVec(&metrics.HistogramOpts{
	Subsystem: metricsSubsystem,
	Name:      "writer_lock_wait_seconds",
}, nil)

var conns = metrics.NewDesc(metricsSubsystem+"_pool_connections", "", nil, nil, metrics.ALPHA, "")

type Store struct{}

func (s *Store) RecordNodeMetrics() {}
`,
		"cmd/apiserver/options.go": `package options

import "github.com/spf13/pflag"

func add(fs *pflag.FlagSet, d *int) {
	fs.IntVar(d, "member-stale-after", 0, "")
	fs.IntVar(d, "leader-elect-renew-deadline", 0, "")
}
`,
		"pkg/registry/postgres/migrations/001_tickets.up.sql": `CREATE TABLE cluster_capacity (cluster_id text, complete_as_of timestamptz);
CREATE FUNCTION registry_wait_tickets() RETURNS void LANGUAGE sql AS $$ SELECT 1 $$;
`,
		"artifacts/chart/files/alerts.rules.yaml": "expr: time() - platform_discovery_member_complete_as_of_timestamp_seconds > 300\n",
		"artifacts/kustomize/dashboard.yaml":      "data:\n  platform-apiserver.json: |\n    {}\n",
		"docs/faults.md":                          "# Faults\n",
		"docs/benchmark-runs.md":                  "`TestGoneLongAgo` is history.\n",
		"hack/docsidents/known.txt":               known,
		"hack/lint/go.mod":                        "module lint\n",
		"hack/lint/tools.go":                      "package lint\n\nfunc NotThisModule() {}\n",
		"hack/docsidents/main_test.go":            "package main\n\nconst fixtureOnly = \"ghost_table\"\n",
	}
	maps.Copy(files, docs)
	for name, text := range files {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func TestCheck(t *testing.T) {
	idx, err := buildIndex(fixture(t, map[string]string{"README.md": ""}, ""), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		tok string
		ok  bool
	}{
		{"store.Writer.ClaimMember", true},
		{"store.Writer.Changes", true}, // embedded Reader
		{"store.Writer", true},
		{"Writer.ClaimMember", true},
		{"store.Node.UnschedulableReason", true},
		{"store.MemberStaleness", true},
		{"Store.RecordNodeMetrics", true},
		{"postgres.Store", true},
		{"syncer.awaitFirstSyncs", true},
		{"awaitFirstSyncs", true},
		{"ErrFenced", true},
		{"unschedulableReason", true}, // a JSON name
		{"status.unschedulableReason", true},
		{"time.Second", true},
		{"TestMemberFreshness", true},
		{"--member-stale-after=2m", true},
		{"--leader-elect-*", true},
		{"-renew-deadline", true}, // the tail of --leader-elect-renew-deadline
		{"platform_registry_writer_lock_wait_seconds", true},
		{"platform_registry_writer_lock_wait_seconds_bucket", true},
		{"platform_registry_writer_lock_*", true},
		{"platform_registry_pool_connections{pool}", true},
		{"platform_discovery_member_complete_as_of_timestamp_seconds", true}, // in an alert rule
		{"wait_seconds", true},                                               // the end of a metric's name
		{"registry_wait_tickets", true},
		{"cluster_capacity.complete_as_of", true},
		{"pkg/registry/staleness.go", true},
		{"pkg/registry/staleness.go:7", true},
		{"docs/faults.md#faults", true},
		{"staleness.go", true},
		{"registry/staleness_test.go", true},
		{"pkg/registry/postgres", true},
		{"hack/lint/go.mod", true},
		{"platform-apiserver.json", true}, // a ConfigMap key in artifacts/
		{"make test-slow", true},
		{"make verify", true},

		// Renamed or removed: each must fail.
		{"store.Writer.ClaimMembers", false},
		{"store.Writers", false},
		{"store.Lease", false},
		{"Writer.Claim", false},
		{"Store.RecordNodeMetric", false},
		{"syncer.awaitFirstSync", false},
		{"awaitFirstSync", false},
		{"ErrFence", false},
		{"NotThisModule", false}, // only in another module (hack/lint)
		{"ghost_table", false},   // only in this check's own test
		{"TestMemberFresh", false},
		{"TestGoneLongAgo", false}, // only in docs/benchmark-runs.md
		{"--member-stale", false},
		{"--member-stale-after-x", false},
		{"platform_registry_writer_lock_hold_seconds", false},
		{"platform_watch_*", false},
		{"registry_wait_ticket", false},
		{"cluster_capacity.completed_as_of", false},
		{"cluster_quota", false},
		{"pkg/registry/freshness.go", false},
		{"docs/fault.md#faults", false},
		{"pkg/registry/store/", true},
		{"pkg/registry/stores", false},
		{"freshness.go", false},
		{"make test-fast", false},
	} {
		refs := classify(tc.tok)
		if len(refs) != 1 {
			t.Errorf("classify(%q) = %v, want one name", tc.tok, refs)
			continue
		}
		if got := idx.check(refs[0]); got != tc.ok {
			t.Errorf("check(%q) = %v, want %v", tc.tok, got, tc.ok)
		}
	}
}

func TestRun(t *testing.T) {
	root := fixture(t, map[string]string{
		"README.md": "The `store.Writer` claims (`store.Writer.ClaimMember`), see `docs/faults.md`.\n",
		"docs/watch.md": "# Watch\n\n`Store.RecordNodeMetric` and\n`--member-stale` and `work_mem`.\n\n" +
			"```\n`Store.Gone` in a fence\n```\n",
	}, "# why\nwork_mem   # PostgreSQL's setting\nunused_name  # no doc names it\n")
	var out strings.Builder
	stale, err := run(&out, root, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	want := "docs/watch.md:3: `Store.RecordNodeMetric` names no Go identifier in the code (renamed or removed? fix the doc or add it to hack/docsidents/known.txt)\n" +
		"docs/watch.md:4: `--member-stale` names no flag in the code (renamed or removed? fix the doc or add it to hack/docsidents/known.txt)\n" +
		"hack/docsidents/known.txt: `unused_name` is not needed (no doc names it, or the code has it): remove it\n" +
		"docs identifiers: 3 problems in 6 references of 3 files\n"
	if stale != 3 || out.String() != want {
		t.Errorf("run = %d, printed:\n%s\nwant 3, printed:\n%s", stale, out.String(), want)
	}
}
