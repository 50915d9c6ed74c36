package framework

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"
	"sigs.k8s.io/yaml"
)

const prometheusStartTimeout = time.Minute

// AlertRulesFile is the alerts' one source, relative to the module root.
const AlertRulesFile = "artifacts/chart/platform-apiserver/files/alerts.rules.yaml"

// PrometheusOptions configures StartPrometheus.
type PrometheusOptions struct {
	// Interval is the scrape and rule evaluation interval; 0 means 1s.
	Interval time.Duration

	// RuleFile is the alerting rules file loaded (as a copy); empty means
	// the module's AlertRulesFile.
	RuleFile string

	// AlertFor replaces the duration of every `for:` line of the copy of
	// RuleFile, and nothing else, so the alerts fire within a test; 0
	// means 2s.
	AlertFor time.Duration

	// PlatformBearerToken is sent to the platform-apiserver's /metrics, as
	// a ServiceMonitor's bearerTokenFile is; empty means the admin client
	// certificate.
	PlatformBearerToken string

	// TargetLabels are added to every series of the platform-apiserver
	// job, as the Prometheus Operator adds the target's namespace and pod;
	// nil means namespace=platform-system, pod=platform-apiserver-0.
	TargetLabels map[string]string
}

// Prometheus is a Prometheus server started by StartPrometheus, scraping
// the platform-apiserver as job "platform-apiserver" and evaluating the
// alerting rules.
type Prometheus struct {
	proc      *process
	url       string
	rulesFile string
	client    *http.Client
}

// StartPrometheus starts /usr/bin/prometheus (the first prometheus on PATH)
// on a free port of 127.0.0.1 with its configuration, rules and TSDB under
// <WorkDir>/prometheus, scraping the platform-apiserver's /metrics over TLS,
// and waits until it is ready. ControlPlane.Stop stops it first. A control
// plane runs one Prometheus.
func (cp *ControlPlane) StartPrometheus(ctx context.Context, opts PrometheusOptions) (*Prometheus, error) {
	cp.mu.Lock()
	started := len(cp.prometheus) > 0
	cp.mu.Unlock()
	if started {
		return nil, fmt.Errorf("start prometheus: this control plane already runs one")
	}
	path, err := exec.LookPath("prometheus")
	if err != nil {
		return nil, fmt.Errorf("prometheus is not installed (run `make deps` as root, or apt-get install --no-install-recommends prometheus): %w", err)
	}
	if opts.Interval <= 0 {
		opts.Interval = time.Second
	}
	if opts.AlertFor <= 0 {
		opts.AlertFor = 2 * time.Second
	}
	if opts.RuleFile == "" {
		root, err := ModuleRoot()
		if err != nil {
			return nil, err
		}
		opts.RuleFile = filepath.Join(root, AlertRulesFile)
	}
	if opts.TargetLabels == nil {
		opts.TargetLabels = map[string]string{"namespace": platformNamespace, "pod": platformServiceName + "-0"}
	}
	dir := filepath.Join(cp.workDir, "prometheus")
	if err := os.MkdirAll(filepath.Join(dir, "data"), 0o700); err != nil {
		return nil, fmt.Errorf("create prometheus directory: %w", err)
	}
	source, err := os.ReadFile(opts.RuleFile)
	if err != nil {
		return nil, fmt.Errorf("read alerting rules: %w", err)
	}
	rulesFile := filepath.Join(dir, "alerts.rules.yaml")
	if err := os.WriteFile(rulesFile, ShortenAlertFor(source, opts.AlertFor), 0o644); err != nil {
		return nil, fmt.Errorf("write alerting rules: %w", err)
	}
	configFile, err := cp.writePrometheusConfig(dir, rulesFile, opts)
	if err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	p := &Prometheus{
		url:       "http://127.0.0.1:" + strconv.Itoa(port),
		rulesFile: rulesFile,
		client:    &http.Client{Timeout: 10 * time.Second},
	}
	args := []string{
		"--config.file=" + configFile,
		"--storage.tsdb.path=" + filepath.Join(dir, "data"),
		"--web.listen-address=127.0.0.1:" + strconv.Itoa(port),
		"--storage.tsdb.retention.time=1d",
		"--log.level=info",
	}
	proc, err := cp.startComponent(ctx, "prometheus", path, args, prometheusStartTimeout, httpCheck(p.url+"/-/ready", nil))
	if err != nil {
		return nil, fmt.Errorf("start prometheus: %w", err)
	}
	p.proc = proc
	cp.mu.Lock()
	cp.prometheus = append(cp.prometheus, proc)
	cp.mu.Unlock()
	return p, nil
}

// forLine is a rule's `for:` line (a YAML key of its own line, which no
// line of an expression block starts with).
var forLine = regexp.MustCompile(`(?m)^([ \t]+for:) \S+$`)

// ShortenAlertFor returns rules with the duration of every `for:` line
// replaced by d; every other byte is kept.
func ShortenAlertFor(rules []byte, d time.Duration) []byte {
	return forLine.ReplaceAll(rules, []byte("${1} "+strconv.FormatInt(d.Milliseconds(), 10)+"ms"))
}

// writePrometheusConfig writes prometheus.yml: one job scraping the
// platform-apiserver, the rules file, the intervals.
func (cp *ControlPlane) writePrometheusConfig(dir, rulesFile string, opts PrometheusOptions) (string, error) {
	caFile := filepath.Join(dir, "platform-ca.crt")
	if err := os.WriteFile(caFile, cp.pki.platformCA.certPEM, 0o644); err != nil {
		return "", fmt.Errorf("write the platform-apiserver's CA for prometheus: %w", err)
	}
	tlsConfig := map[string]any{"ca_file": caFile}
	job := map[string]any{
		"job_name":     platformServiceName,
		"scheme":       "https",
		"metrics_path": "/metrics",
		"static_configs": []any{map[string]any{
			"targets": []string{"127.0.0.1:" + strconv.Itoa(cp.platformPort)},
			"labels":  opts.TargetLabels,
		}},
		"tls_config": tlsConfig,
	}
	if opts.PlatformBearerToken != "" {
		tokenFile := filepath.Join(dir, "token")
		if err := os.WriteFile(tokenFile, []byte(opts.PlatformBearerToken), 0o600); err != nil {
			return "", fmt.Errorf("write prometheus's token: %w", err)
		}
		job["authorization"] = map[string]any{"type": "Bearer", "credentials_file": tokenFile}
	} else {
		tlsConfig["cert_file"] = cp.pki.admin.certFile
		tlsConfig["key_file"] = cp.pki.admin.keyFile
	}
	interval := strconv.FormatInt(opts.Interval.Milliseconds(), 10) + "ms"
	config := map[string]any{
		"global": map[string]any{
			"scrape_interval":     interval,
			"scrape_timeout":      interval,
			"evaluation_interval": interval,
		},
		"rule_files":     []string{rulesFile},
		"scrape_configs": []any{job},
	}
	data, err := yaml.Marshal(config)
	if err != nil {
		return "", fmt.Errorf("encode prometheus.yml: %w", err)
	}
	file := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(file, data, 0o644); err != nil {
		return "", fmt.Errorf("write prometheus.yml: %w", err)
	}
	return file, nil
}

// URL returns Prometheus's http URL on 127.0.0.1.
func (p *Prometheus) URL() string { return p.url }

// RulesFile returns the copy of the rules Prometheus loads.
func (p *Prometheus) RulesFile() string { return p.rulesFile }

// LogPath returns the file Prometheus's output goes to.
func (p *Prometheus) LogPath() string { return p.proc.logPath() }

// Stop stops Prometheus (SIGTERM, then SIGKILL after a grace period).
func (p *Prometheus) Stop() error { return p.proc.stop() }

// PromSample is one series of an instant query's answer.
type PromSample struct {
	Labels map[string]string
	Value  string // as Prometheus writes it: "1", "0.25", "NaN", "+Inf"
}

// PromAlert is an active (pending or firing) alert of /api/v1/alerts.
type PromAlert struct {
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
	State       string            `json:"state"`
	ActiveAt    time.Time         `json:"activeAt"`
	Value       string            `json:"value"`
}

// PromTarget is a scrape target of /api/v1/targets.
type PromTarget struct {
	Labels    map[string]string `json:"labels"`
	ScrapeURL string            `json:"scrapeUrl"`
	Health    string            `json:"health"`
	LastError string            `json:"lastError"`
}

// PromRule is a rule of /api/v1/rules.
type PromRule struct {
	Name     string  `json:"name"`
	Query    string  `json:"query"`
	Duration float64 `json:"duration"` // for, in seconds
	Type     string  `json:"type"`     // alerting or recording
	State    string  `json:"state"`    // inactive, pending, firing
	Health   string  `json:"health"`
}

// api GETs /api/v1/<path> and decodes its data into out.
func (p *Prometheus) api(ctx context.Context, path string, query url.Values, out any) error {
	u := p.url + "/api/v1/" + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return fmt.Errorf("prometheus %s: %w", path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("prometheus %s: %w", path, err)
	}
	var envelope struct {
		Status    string          `json:"status"`
		Data      json.RawMessage `json:"data"`
		ErrorType string          `json:"errorType"`
		Error     string          `json:"error"`
	}
	if err := json.Unmarshal(body, &envelope); err != nil {
		return fmt.Errorf("prometheus %s: %s: %.300s", path, resp.Status, body)
	}
	if envelope.Status != "success" {
		return fmt.Errorf("prometheus %s: %s: %s: %s", path, resp.Status, envelope.ErrorType, envelope.Error)
	}
	if err := json.Unmarshal(envelope.Data, out); err != nil {
		return fmt.Errorf("prometheus %s: decode data: %w", path, err)
	}
	return nil
}

// Query runs an instant PromQL query now (/api/v1/query). A scalar answer
// is one sample without labels; a range vector is an error.
func (p *Prometheus) Query(ctx context.Context, expr string) ([]PromSample, error) {
	var data struct {
		ResultType string          `json:"resultType"`
		Result     json.RawMessage `json:"result"`
	}
	if err := p.api(ctx, "query", url.Values{"query": {expr}}, &data); err != nil {
		return nil, fmt.Errorf("%w (query %s)", err, expr)
	}
	switch data.ResultType {
	case "vector":
		var vec []struct {
			Metric map[string]string `json:"metric"`
			Value  [2]any            `json:"value"`
		}
		if err := json.Unmarshal(data.Result, &vec); err != nil {
			return nil, fmt.Errorf("decode vector of %s: %w", expr, err)
		}
		out := make([]PromSample, 0, len(vec))
		for _, s := range vec {
			v, _ := s.Value[1].(string)
			out = append(out, PromSample{Labels: s.Metric, Value: v})
		}
		return out, nil
	case "scalar", "string":
		var v [2]any
		if err := json.Unmarshal(data.Result, &v); err != nil {
			return nil, fmt.Errorf("decode %s of %s: %w", data.ResultType, expr, err)
		}
		s, _ := v[1].(string)
		return []PromSample{{Labels: map[string]string{}, Value: s}}, nil
	default:
		return nil, fmt.Errorf("query %s: result type %s, want an instant vector or a scalar", expr, data.ResultType)
	}
}

// Alerts returns the active alerts (/api/v1/alerts): pending and firing.
func (p *Prometheus) Alerts(ctx context.Context) ([]PromAlert, error) {
	var data struct {
		Alerts []PromAlert `json:"alerts"`
	}
	err := p.api(ctx, "alerts", nil, &data)
	return data.Alerts, err
}

// Targets returns the active scrape targets (/api/v1/targets).
func (p *Prometheus) Targets(ctx context.Context) ([]PromTarget, error) {
	var data struct {
		ActiveTargets []PromTarget `json:"activeTargets"`
	}
	err := p.api(ctx, "targets", url.Values{"state": {"active"}}, &data)
	return data.ActiveTargets, err
}

// Rules returns the loaded rules of every group (/api/v1/rules).
func (p *Prometheus) Rules(ctx context.Context) ([]PromRule, error) {
	var data struct {
		Groups []struct {
			Rules []PromRule `json:"rules"`
		} `json:"groups"`
	}
	if err := p.api(ctx, "rules", nil, &data); err != nil {
		return nil, err
	}
	var out []PromRule
	for _, g := range data.Groups {
		out = append(out, g.Rules...)
	}
	return out, nil
}

// WaitFor polls cond every 250ms until it reports true or timeout passes;
// the error names what and carries cond's last message.
func (p *Prometheus) WaitFor(ctx context.Context, what string, timeout time.Duration, cond func(ctx context.Context) (bool, string)) error {
	var last string
	start := time.Now()
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		if done, exitErr := p.proc.exited(); done {
			return false, fmt.Errorf("prometheus exited: %w; last lines of %s:\n%s", exitErr, p.LogPath(), logTail(p.LogPath(), 20))
		}
		ok, msg := cond(ctx)
		if ctx.Err() == nil { // keep the last answer, not the deadline's
			last = msg
		}
		return ok, nil
	})
	if err != nil {
		return fmt.Errorf("waiting %s for %s: %w; last observation: %s", timeout, what, err, last)
	}
	klog.FromContext(ctx).V(2).Info("Prometheus condition holds", "what", what, "after", time.Since(start).Round(time.Millisecond))
	return nil
}

// WaitForSeries waits until expr answers at least one series and returns them.
func (p *Prometheus) WaitForSeries(ctx context.Context, expr string, timeout time.Duration) ([]PromSample, error) {
	var got []PromSample
	err := p.WaitFor(ctx, "series of "+expr, timeout, func(ctx context.Context) (bool, string) {
		var err error
		if got, err = p.Query(ctx, expr); err != nil {
			return false, err.Error()
		}
		return len(got) > 0, "no series"
	})
	return got, err
}

// WaitForTargetsUp waits until every scrape target's last scrape succeeded.
func (p *Prometheus) WaitForTargetsUp(ctx context.Context, timeout time.Duration) error {
	return p.WaitFor(ctx, "every target up", timeout, func(ctx context.Context) (bool, string) {
		targets, err := p.Targets(ctx)
		if err != nil {
			return false, err.Error()
		}
		var down []string
		for _, t := range targets {
			if t.Health != "up" {
				down = append(down, fmt.Sprintf("%s %s: %s", t.ScrapeURL, t.Health, t.LastError))
			}
		}
		return len(targets) > 0 && len(down) == 0, fmt.Sprintf("%d targets, not up: %s", len(targets), strings.Join(down, "; "))
	})
}

// FindAlerts returns the active alerts named name whose labels include
// every one of labels.
func FindAlerts(alerts []PromAlert, name string, labels map[string]string) []PromAlert {
	var out []PromAlert
	for _, a := range alerts {
		if a.Labels["alertname"] != name {
			continue
		}
		match := true
		for k, v := range labels {
			if a.Labels[k] != v {
				match = false
			}
		}
		if match {
			out = append(out, a)
		}
	}
	return out
}

// WaitForAlert waits until alert name with labels is in state ("firing" or
// "pending"), or, with state "", until no such alert is active; it returns
// the matching alerts.
func (p *Prometheus) WaitForAlert(ctx context.Context, name string, labels map[string]string, state string, timeout time.Duration) ([]PromAlert, error) {
	what := fmt.Sprintf("alert %s%v %s", name, labels, state)
	if state == "" {
		what = fmt.Sprintf("alert %s%v inactive", name, labels)
	}
	var got []PromAlert
	err := p.WaitFor(ctx, what, timeout, func(ctx context.Context) (bool, string) {
		alerts, err := p.Alerts(ctx)
		if err != nil {
			return false, err.Error()
		}
		got = FindAlerts(alerts, name, labels)
		if state == "" {
			return len(got) == 0, fmt.Sprintf("active: %+v", got)
		}
		for _, a := range got {
			if a.State == state {
				return true, ""
			}
		}
		return false, fmt.Sprintf("matching: %+v; all active: %d", got, len(alerts))
	})
	if err != nil {
		return nil, err
	}
	return got, nil
}
