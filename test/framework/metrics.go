package framework

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// PlatformMetrics returns the platform-apiserver's /metrics (Prometheus text
// format), read from its own port as the admin.
func (cp *ControlPlane) PlatformMetrics(ctx context.Context) (string, error) {
	tlsConfig, err := tlsTo(cp.pki.platformCA.certPEM, cp.pki.admin)
	if err != nil {
		return "", err
	}
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsConfig}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, cp.PlatformServerURL()+"/metrics", nil)
	if err != nil {
		return "", err
	}
	resp, err := client.Do(req)
	if err != nil {
		return "", fmt.Errorf("read platform-apiserver metrics: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", fmt.Errorf("read platform-apiserver metrics: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET /metrics: %s", resp.Status)
	}
	return string(body), nil
}

// MetricSum adds up the samples of the metric name in body (Prometheus text
// format) whose labels contain every one of labels (as `key="value"`).
func MetricSum(body, name string, labels ...string) (float64, error) {
	total := 0.0
	err := eachSample(body, name, func(rest string, v float64) {
		if containsAll(rest, labels) {
			total += v
		}
	})
	return total, err
}

// MetricSumBy sums the samples of metric name in a Prometheus text body by
// the value of one label ("" for samples without it).
func MetricSumBy(body, name, label string) (map[string]float64, error) {
	out := map[string]float64{}
	err := eachSample(body, name, func(rest string, v float64) {
		value := ""
		for _, start := range []string{"{", ","} { // the label itself, not one whose name ends in it
			if _, after, found := strings.Cut(rest, start+label+`="`); found {
				value, _, _ = strings.Cut(after, `"`)
				break
			}
		}
		out[value] += v
	})
	return out, err
}

// eachSample calls f with each sample of metric name in body: the line
// after the name (its labels and value) and the value.
func eachSample(body, name string, f func(rest string, v float64)) error {
	for line := range strings.Lines(body) {
		rest, ok := strings.CutPrefix(line, name)
		if !ok || (!strings.HasPrefix(rest, "{") && !strings.HasPrefix(rest, " ")) {
			continue
		}
		fields := strings.Fields(rest)
		v, err := strconv.ParseFloat(fields[len(fields)-1], 64)
		if err != nil {
			return fmt.Errorf("parse metric line %q: %w", strings.TrimSpace(line), err)
		}
		f(rest, v)
	}
	return nil
}

func containsAll(s string, parts []string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}
