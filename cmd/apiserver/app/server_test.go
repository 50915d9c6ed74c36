package app

import (
	"bytes"
	"strings"
	"testing"
)

// TestBadFlags checks that bad flags and configs end the command with a
// message that says what is wrong, before anything starts.
func TestBadFlags(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{"malformed dsn", []string{"--postgres-dsn=postgres://[::1"}, []string{"--postgres-dsn", "expected postgres://"}},
		{"non-positive continue ttl", []string{"--continue-token-ttl=0s"}, []string{"--continue-token-ttl must be positive"}},
		{"port out of range", []string{"--secure-port=70000"}, []string{"--secure-port 70000 must be between 1 and 65535"}},
		{"several problems reported together", []string{"--continue-token-ttl=-1s", "--secure-port=70000"}, []string{"--continue-token-ttl", "--secure-port"}},
		{"unknown flag", []string{"--etcd-servers=http://127.0.0.1:2379"}, []string{"unknown flag: --etcd-servers"}},
		{"migrate with malformed dsn", []string{"migrate", "--postgres-dsn=host=h port=notaport"}, []string{"--postgres-dsn"}},
		{"negative usage report threshold", []string{"--usage-report-threshold=-0.1"}, []string{"--usage-report-threshold", "between 0 and 1", "got -0.1"}},
		{"usage report threshold above 1", []string{"--usage-report-threshold=5"}, []string{"--usage-report-threshold", "between 0 and 1"}},
		{"usage report threshold not a number", []string{"--usage-report-threshold=five"}, []string{"--usage-report-threshold"}},
		{"negative usage report period", []string{"--usage-report-period=-5m"}, []string{"--usage-report-period must be 0 (off, the default) or a positive duration", "got -5m0s"}},
		{"usage unknown after too short", []string{"--usage-unknown-after=1m"}, []string{"--usage-unknown-after (1m0s) must be at least 2m0s with --metrics-interval=30s"}},
		{"usage unknown after too short for the interval", []string{"--metrics-interval=2m", "--usage-unknown-after=4m"}, []string{"--usage-unknown-after (4m0s) must be at least 5m0s"}},
		{"usage unknown after too short for the resolution", []string{"--metrics-interval=5s", "--metrics-resolution=30s", "--usage-unknown-after=30s"},
			[]string{"--usage-unknown-after (30s) must be at least 40s with --metrics-interval=5s and --metrics-resolution=30s"}},
		{"query resources below a pod shape", []string{"--max-query-resources=1"}, []string{"--max-query-resources must be at least 2 (a pod shape asks for cpu and memory), got 1"}},
		{"zero query tolerations", []string{"--max-query-tolerations=0"}, []string{"--max-query-tolerations must be at least 1, got 0"}},
		{"zero metrics resolution", []string{"--metrics-resolution=0s"}, []string{"--metrics-resolution must be positive", "got 0s"}},
		{"negative member removal grace", []string{"--member-removal-grace-period=-1m"}, []string{"--member-removal-grace-period must be zero or positive", "got -1m0s"}},
		{"positional arguments", []string{"serve"}, []string{"unknown command \"serve\""}},
		{"malformed read dsn", []string{"--postgres-read-dsn=postgres://[::1"}, []string{"--postgres-read-dsn", "expected postgres://"}},
		{"negative standby wait", []string{"--postgres-standby-wait=-1s"}, []string{"--postgres-standby-wait must be zero or positive"}},
		{"missing read dsn file", []string{"--postgres-read-dsn-file=/nonexistent/standby"}, []string{"--postgres-read-dsn-file", "/nonexistent/standby"}},
		{"dsn without verified TLS", []string{"--postgres-dsn=postgres://u@db.example.com/platform?sslmode=require"},
			[]string{"--postgres-dsn has sslmode=require", "sslmode=verify-full", "--postgres-allow-insecure"}},
		{"migrate with a dsn without sslmode", []string{"migrate", "--postgres-dsn=host=db.example.com dbname=platform"},
			[]string{"--postgres-dsn sets no sslmode", "--postgres-allow-insecure"}},
		{"member stale after too short", []string{"--member-stale-after=30s"}, []string{"--member-stale-after must be 0 (never stale) or at least 2m0s", "got 30s"}},
		{"zero standby max lag", []string{"--postgres-standby-max-lag=0s"}, []string{"--postgres-standby-max-lag must be positive", "got 0s"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := NewCommand(t.Context())
			var out bytes.Buffer
			cmd.SetOut(&out)
			cmd.SetErr(&out)
			cmd.SetArgs(tt.args)
			err := cmd.Execute()
			if err == nil {
				t.Fatalf("%v: no error", tt.args)
			}
			for _, want := range tt.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("%v: error %q lacks %q", tt.args, err, want)
				}
			}
		})
	}
}

func TestHelpNamesTheSections(t *testing.T) {
	cmd := NewCommand(t.Context())
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"--help"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Registry database flags", "--postgres-dsn", "Delegated authentication flags", "migrate"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("--help lacks %q", want)
		}
	}
}
