package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/example/platform-apiserver/pkg/registry"
	"github.com/example/platform-apiserver/test/framework"
)

// monitoringTimeout bounds each wait on Prometheus: a scrape and a rule
// evaluation every second, the alerts' for shortened to alertFor.
const (
	monitoringTimeout = 2 * time.Minute
	alertFor          = 2 * time.Second
)

// TestMonitoring runs the shipped alerts and dashboard against a real
// Prometheus scraping a real platform-apiserver, as the ServiceMonitor
// does: over TLS with the monitoring component's metrics-reader RBAC and a
// ServiceAccount token. The rules are a copy of the chart's
// files/alerts.rules.yaml whose `for:` durations alone are shortened
// (every expression byte-identical). A second member ("east", the same
// cluster through a forwarder) goes away: PlatformMemberUnreachable fires
// for it, and for it only, then, once its mirror heartbeat is 5 minutes
// old, PlatformMemberStale; it comes back: the alerts resolve. Then every
// query of files/dashboard.json answers at least one series with a number,
// and its variables the members and the namespace.
func TestMonitoring(t *testing.T) {
	t.Parallel()
	root, err := framework.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	e := newEnv(t, framework.Options{
		PlatformAPIServerBinary: os.Getenv("PLATFORM_APISERVER_BINARY"),
		StartSimulator:          true, // metrics.k8s.io, for the usage panels
		StartControllerManager:  true, // lifts the nodes' not-ready taint
		ExtraPlatformArgs: []string{"--cluster-id=local", "--kubeconfig=kubeconfig", "--discovery-batch-delay=50ms",
			"--member-kubeconfig-dir=" + dir, "--member-kubeconfig-dir-interval=300ms", "--metrics-interval=2s"},
	})
	ctx := t.Context()
	for _, n := range []string{"m1", "m2"} {
		if _, err := e.cp.CreateSimulatedNode(ctx, framework.SimulatedNode{Name: n}); err != nil {
			t.Fatal(err)
		}
	}
	e.kubectl(t, "create", "namespace", "apps")
	create(t, e.kube.CoreV1().Pods("apps").Create, testPod("apps", "web", "m1", "500m", "1Gi"))

	// The second member is the hosting cluster through a forwarder the test
	// stops (connections refused, as by a stopped API server) and restarts.
	fwd := e.forwardedMember(t, dir, "east")

	// Prometheus scrapes as kube-prometheus's prometheus-k8s, allowed
	// GET /metrics by the monitoring component's own ClusterRoleBinding.
	e.kubectl(t, "create", "namespace", "monitoring")
	e.kubectl(t, "-n", "monitoring", "create", "serviceaccount", "prometheus-k8s")
	e.kubectl(t, "apply", "-f", filepath.Join(root, "artifacts/kustomize/components/monitoring/metrics-reader.yaml"))
	token, err := e.cp.ServiceAccountToken(ctx, "monitoring", "prometheus-k8s")
	if err != nil {
		t.Fatal(err)
	}
	prom, err := e.cp.StartPrometheus(ctx, framework.PrometheusOptions{PlatformBearerToken: token, AlertFor: alertFor})
	if err != nil {
		t.Fatal(err)
	}
	if err := prom.WaitForTargetsUp(ctx, monitoringTimeout); err != nil {
		t.Fatal(err)
	}
	checkRulesCopy(t, filepath.Join(root, framework.AlertRulesFile), prom)

	if err := prom.WaitFor(ctx, "both members synced, as Prometheus scraped it", monitoringTimeout, func(ctx context.Context) (bool, string) {
		s, err := prom.Query(ctx, `platform_discovery_members{state="synced"}`)
		return err == nil && len(s) == 1 && s[0].Value == "2", fmt.Sprint(s, err)
	}); err != nil {
		t.Fatal(err)
	}

	// east goes away.
	cut := time.Now()
	fwd.Stop()
	alerts, err := prom.WaitForAlert(ctx, "PlatformMemberUnreachable", map[string]string{"cluster": "east"}, "firing", monitoringTimeout)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("PlatformMemberUnreachable firing for east %s after its API went away", time.Since(cut).Round(time.Second))
	for _, a := range alerts {
		want := map[string]string{"alertname": "PlatformMemberUnreachable", "cluster": "east", "namespace": "platform-system", "severity": "warning"}
		for k, v := range want {
			if a.Labels[k] != v {
				t.Errorf("alert label %s = %q, want %q (labels %v)", k, a.Labels[k], v, a.Labels)
			}
		}
		if !strings.Contains(a.Annotations["summary"], "east") || !strings.HasSuffix(a.Annotations["runbook_url"], "docs/runbook.md#platformmemberunreachable") {
			t.Errorf("alert annotations %v: want a summary naming east and the runbook's section", a.Annotations)
		}
	}
	eventually(t, "east's ClusterCapacity Unreachable while the alert fires", mirrorTimeout, func(ctx context.Context) (bool, string) {
		state := e.jsonpath(ctx, "{.status.mirroring.state}", "get", "clustercapacity", "east")
		return state == "Unreachable", state
	})
	all, err := prom.Alerts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if local := framework.FindAlerts(all, "PlatformMemberUnreachable", map[string]string{"cluster": "local"}); len(local) > 0 {
		t.Errorf("PlatformMemberUnreachable is active for local, which answers: %+v", local)
	}

	// Nothing vouches for east's mirror any more: once its heartbeat is
	// --member-stale-after (5m) old, readers show it Stale and
	// PlatformMemberStale fires (its expression's 300 s unchanged).
	if _, err := prom.WaitForAlert(ctx, "PlatformMemberStale", map[string]string{"cluster": "east"}, "firing", registry.DefaultMemberStaleAfter+monitoringTimeout); err != nil {
		t.Fatal(err)
	}
	t.Logf("PlatformMemberStale firing for east %s after its API went away", time.Since(cut).Round(time.Second))
	eventually(t, "east's ClusterCapacity Stale while the alert fires", mirrorTimeout, func(ctx context.Context) (bool, string) {
		state := e.jsonpath(ctx, "{.status.mirroring.state}", "get", "clustercapacity", "east")
		return state == "Stale", state
	})
	if all, err = prom.Alerts(ctx); err != nil {
		t.Fatal(err)
	}
	if local := framework.FindAlerts(all, "PlatformMemberStale", map[string]string{"cluster": "local"}); len(local) > 0 {
		t.Errorf("PlatformMemberStale is active for local, whose mirror is current: %+v", local)
	}

	// east comes back.
	restored := time.Now()
	if err := fwd.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := prom.WaitForAlert(ctx, "PlatformMemberUnreachable", map[string]string{"cluster": "east"}, "", monitoringTimeout); err != nil {
		t.Fatal(err)
	}
	t.Logf("PlatformMemberUnreachable resolved %s after east's API came back", time.Since(restored).Round(time.Second))
	if _, err := prom.WaitForAlert(ctx, "PlatformMemberStale", map[string]string{"cluster": "east"}, "", 2*monitoringTimeout); err != nil {
		t.Fatal(err)
	}
	t.Logf("PlatformMemberStale resolved %s after east's API came back", time.Since(restored).Round(time.Second))
	// The registry records the member's state after the replica knows it.
	eventually(t, "east's ClusterCapacity Synced again", mirrorTimeout, func(ctx context.Context) (bool, string) {
		state := e.jsonpath(ctx, "{.status.mirroring.state}", "get", "clustercapacity", "east")
		return state == "Synced", state
	})

	// east's address answers and its API does not: a proxy in front of a
	// stopped API server accepts each connection and closes it. client-go
	// answers such a watch with one that ends at once and no error; a run
	// of them makes the member unreachable, never silently Synced.
	dropped := time.Now()
	fwd.DropConnections()
	if _, err := prom.WaitForAlert(ctx, "PlatformMemberUnreachable", map[string]string{"cluster": "east"}, "firing", monitoringTimeout); err != nil {
		t.Fatal(err)
	}
	t.Logf("PlatformMemberUnreachable firing for east %s after a proxy in front of it began closing every connection", time.Since(dropped).Round(time.Second))
	eventually(t, "east's ClusterCapacity Unreachable behind the hanging-up proxy", mirrorTimeout, func(ctx context.Context) (bool, string) {
		state := e.jsonpath(ctx, "{.status.mirroring.state}", "get", "clustercapacity", "east")
		return state == "Unreachable", state
	})
	fwd.Resume()
	eventually(t, "east's ClusterCapacity Synced once the proxy relays again", mirrorTimeout, func(ctx context.Context) (bool, string) {
		state := e.jsonpath(ctx, "{.status.mirroring.state}", "get", "clustercapacity", "east")
		return state == "Synced", state
	})

	checkDashboard(t, e, filepath.Join(root, "artifacts/chart/platform-apiserver/files/dashboard.json"), prom)
}

// alertRules is the part of a rules file the copy must keep.
type alertRules struct {
	Groups []struct {
		Name  string `json:"name"`
		Rules []struct {
			Alert       string            `json:"alert"`
			Expr        string            `json:"expr"`
			For         string            `json:"for"`
			Labels      map[string]string `json:"labels"`
			Annotations map[string]string `json:"annotations"`
		} `json:"rules"`
	} `json:"groups"`
}

// checkRulesCopy checks that the rules Prometheus loaded are the source
// with only the `for:` lines changed, every expression byte-identical, and
// that Prometheus evaluates every one of them.
func checkRulesCopy(t *testing.T, sourcePath string, prom *framework.Prometheus) {
	t.Helper()
	source, err := os.ReadFile(sourcePath)
	if err != nil {
		t.Fatal(err)
	}
	shortened, err := os.ReadFile(prom.RulesFile())
	if err != nil {
		t.Fatal(err)
	}
	forLine := regexp.MustCompile(`^[ \t]+for: \S+$`)
	src, cp := strings.Split(string(source), "\n"), strings.Split(string(shortened), "\n")
	if len(src) != len(cp) {
		t.Fatalf("the rules copy has %d lines, the source %d", len(cp), len(src))
	}
	changed := 0
	for i := range src {
		if src[i] == cp[i] {
			continue
		}
		changed++
		if !forLine.MatchString(src[i]) || !forLine.MatchString(cp[i]) {
			t.Errorf("line %d of the rules copy differs from the source beyond a for: duration:\nsource: %q\ncopy:   %q", i+1, src[i], cp[i])
		}
	}
	var a, b alertRules
	if err := yaml.Unmarshal(source, &a); err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(shortened, &b); err != nil {
		t.Fatal(err)
	}
	var alerts []string
	withFor := 0
	for gi, g := range a.Groups {
		for ri, r := range g.Rules {
			c := b.Groups[gi].Rules[ri]
			alerts = append(alerts, r.Alert)
			if c.Alert != r.Alert || c.Expr != r.Expr || fmt.Sprint(c.Labels) != fmt.Sprint(r.Labels) || fmt.Sprint(c.Annotations) != fmt.Sprint(r.Annotations) {
				t.Errorf("rule %s: the copy differs beyond for:\nsource expr: %q\ncopy expr:   %q", r.Alert, r.Expr, c.Expr)
			}
			if r.For != "" {
				withFor++
				if want := fmt.Sprintf("%dms", alertFor.Milliseconds()); c.For != want {
					t.Errorf("rule %s: for %q in the copy, want %s", r.Alert, c.For, want)
				}
			}
		}
	}
	if changed != withFor || len(alerts) == 0 {
		t.Errorf("%d lines of the copy changed, want the %d for: lines of %d alerts", changed, withFor, len(alerts))
	}
	loaded, err := prom.Rules(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range loaded {
		if r.Type != "alerting" || r.Health == "err" || r.Duration > alertFor.Seconds() {
			t.Errorf("Prometheus rule %s: type %s, health %s, for %vs; want alerting, not err, at most %v", r.Name, r.Type, r.Health, r.Duration, alertFor)
		}
		names = append(names, r.Name)
	}
	if !slices.Equal(names, alerts) {
		t.Errorf("Prometheus loaded the rules %v, want %v", names, alerts)
	}
}

// grafanaDashboard is what the test reads of files/dashboard.json.
type grafanaDashboard struct {
	SchemaVersion int                         `json:"schemaVersion"`
	UID           string                      `json:"uid"`
	Panels        []grafanaPanel              `json:"panels"`
	Templating    struct{ List []grafanaVar } `json:"templating"`
}

type grafanaPanel struct {
	Type       string             `json:"type"`
	Title      string             `json:"title"`
	Datasource *grafanaDatasource `json:"datasource"`
	Targets    []struct {
		Expr       string             `json:"expr"`
		Datasource *grafanaDatasource `json:"datasource"`
	} `json:"targets"`
	Panels []grafanaPanel `json:"panels"` // a collapsed row's
}

type grafanaDatasource struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

type grafanaVar struct {
	Name       string             `json:"name"`
	Type       string             `json:"type"`
	Query      any                `json:"query"`
	Datasource *grafanaDatasource `json:"datasource"`
	AllValue   string             `json:"allValue"`
}

// dashboardVars are the substitutions for the dashboard's variables: every
// namespace and member, and a rate window of a minute (over a scrape each
// second).
var dashboardVars = strings.NewReplacer(
	"$__rate_interval", "1m", "${__rate_interval}", "1m",
	"${namespace}", ".*", "$namespace", ".*",
	"${cluster}", ".*", "$cluster", ".*",
)

// checkDashboard runs every target's query of the dashboard against
// Prometheus, each until it answers at least one series, and the member and
// namespace variables' label_values queries.
func checkDashboard(t *testing.T, e *env, path string, prom *framework.Prometheus) {
	t.Helper()
	ctx := t.Context()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var d grafanaDashboard
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if d.SchemaVersion < 39 || d.UID == "" {
		t.Errorf("dashboard schemaVersion %d, uid %q: want 39 or later and a uid", d.SchemaVersion, d.UID)
	}
	vars := map[string]grafanaVar{}
	for _, v := range d.Templating.List {
		vars[v.Name] = v
	}
	if v := vars["datasource"]; v.Type != "datasource" || v.Query != "prometheus" {
		t.Errorf("the dashboard's datasource variable is %+v, want type datasource of prometheus", v)
	}
	wantDS := grafanaDatasource{Type: "prometheus", UID: "${datasource}"}
	// Changes for both members to mirror (the commit panels), and requests
	// of the platform API (the request panels).
	e.kubectl(t, "create", "namespace", "dashboard")
	e.kubectl(t, "label", "namespace", "apps", "dashboard=seen")
	for _, kind := range []string{"nodecapacities", "clustercapacities", "clusternamespaces"} {
		e.kubectl(t, "get", kind, "-A")
	}

	var panels []grafanaPanel
	for _, p := range d.Panels {
		panels = append(panels, p)
		panels = append(panels, p.Panels...)
	}
	queries := 0
	for _, p := range panels {
		if p.Type == "row" {
			continue
		}
		if p.Datasource == nil || *p.Datasource != wantDS {
			t.Errorf("panel %q: datasource %+v, want %+v", p.Title, p.Datasource, wantDS)
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, target := range p.Targets {
			if target.Datasource == nil || *target.Datasource != wantDS {
				t.Errorf("panel %q: a target's datasource %+v, want %+v", p.Title, target.Datasource, wantDS)
			}
			expr := dashboardVars.Replace(target.Expr)
			if strings.Contains(expr, "$") {
				t.Errorf("panel %q: a variable the test does not know in %s", p.Title, target.Expr)
				continue
			}
			queries++
			// At least one series, and one with a number (a quantile of no
			// observations in the window is NaN: wait for some).
			var got []framework.PromSample
			var finite *framework.PromSample
			start := time.Now()
			if err := prom.WaitFor(ctx, fmt.Sprintf("panel %q: a series of %s with a value", p.Title, expr), monitoringTimeout, func(ctx context.Context) (bool, string) {
				var err error
				if got, err = prom.Query(ctx, expr); err != nil {
					return false, err.Error()
				}
				for i, s := range got {
					if v, err := strconv.ParseFloat(s.Value, 64); err == nil && !math.IsNaN(v) && !math.IsInf(v, 0) {
						finite = &got[i]
						return true, ""
					}
				}
				return false, fmt.Sprintf("%d series, none with a number: %v", len(got), got)
			}); err != nil {
				t.Error(err)
				continue
			}
			t.Logf("panel %q: %d series, e.g. %v = %s (after %s)", p.Title, len(got), finite.Labels, finite.Value, time.Since(start).Round(time.Millisecond))
		}
	}
	if queries == 0 {
		t.Error("the dashboard has no queries")
	}

	// The variables: label_values(<selector>, <label>).
	labelValues := regexp.MustCompile(`^label_values\((.+), (\w+)\)$`)
	for name, want := range map[string][]string{"namespace": {"platform-system"}, "cluster": {"local", "east"}} {
		v := vars[name]
		q, _ := v.Query.(map[string]any)
		query, _ := q["query"].(string)
		m := labelValues.FindStringSubmatch(query)
		if v.Type != "query" || m == nil || v.AllValue != ".*" || v.Datasource == nil || *v.Datasource != wantDS {
			t.Errorf("variable %s: %+v, want a label_values query with allValue .* on the datasource variable", name, v)
			continue
		}
		if err := prom.WaitFor(ctx, "the values of variable "+name, monitoringTimeout, func(ctx context.Context) (bool, string) {
			got, err := prom.Query(ctx, dashboardVars.Replace(m[1]))
			if err != nil {
				return false, err.Error()
			}
			var values []string
			for _, s := range got {
				if !slices.Contains(values, s.Labels[m[2]]) {
					values = append(values, s.Labels[m[2]])
				}
			}
			for _, w := range want {
				if !slices.Contains(values, w) {
					return false, fmt.Sprintf("values %v, want %v among them", values, want)
				}
			}
			return true, ""
		}); err != nil {
			t.Error(err)
		}
	}
}
