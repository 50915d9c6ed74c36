package integration

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"debug/elf"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/example/platform-apiserver/test/framework"
	pgtest "github.com/example/platform-apiserver/test/framework/postgres"
)

const (
	installNamespace = "platform-system"
	installAPI       = "v1alpha1.platform.example.io"
	leaseSetLabel    = "platform.example.io/discovery-lease-set"
)

// installEnv is one control plane on which the install tests apply the
// manifests, with the image and tools they need.
type installEnv struct {
	cp       *framework.ControlPlane
	root     string // module root
	archive  string // the image archive
	helm     string // directory of helm
	work     string // the README's current directory: certificates, artifacts/ (a link), platform-install/
	cert     *framework.ServingCert
	shellEnv []string
}

// TestInstall installs platform-apiserver as README.md says, on a real
// kube-apiserver (with kube-controller-manager), from the image `make image`
// builds — one control plane for everything:
//
//   - image: the archive unpacks as docker load reads it; its config runs the
//     binary as 65532 with no shell in the image; the binary is static, its
//     --help runs from the unpacked filesystem, and the stack's own
//     platform-apiserver is that binary (a real start);
//   - dry-run: every packaging variant (kustomize base and each component,
//     the Helm chart with default, HA and cert-manager+monitoring values)
//     passes server-side dry-run, with the pinned upstream CRDs installed; the
//     chart and the base agree on the container and the RBAC;
//   - kustomize and helm: the README's commands, run as written, while a
//     test kubelet runs the applied Deployment's pod from the image (chroot,
//     as 65532, in-cluster config from a TokenRequest token of the
//     ServiceAccount, the Secret volumes): the APIService becomes Available
//     with the manifests' RBAC alone, the cluster is mirrored, Leases appear in
//     the server's namespace, GET /metrics is allowed by the monitoring
//     ClusterRole and refused without it, `migrate status` runs in the pod;
//     then the README's uninstall commands remove it.
func TestInstall(t *testing.T) {
	oneFaultTestAtATime(t)
	if os.Geteuid() != 0 {
		t.Fatal("TestInstall runs the image's filesystem with chroot, which needs root (as make test runs on this project's machines)")
	}
	e := &installEnv{}
	var err error
	if e.root, err = framework.ModuleRoot(); err != nil {
		t.Fatal(err)
	}
	e.archive = buildImage(t, e.root)
	img := checkImage(t, e.archive)

	e.cp = framework.ForTest(t, framework.Options{
		PlatformAPIServerBinary: img.Entrypoint(),
		StartControllerManager:  true, // namespace deletion, Deployments' ReplicaSets
	})
	if out, _, err := e.cp.Kubectl(t.Context(), "get", "--raw", "/apis/platform.example.io/v1alpha1"); err != nil || !strings.Contains(out, "nodecapacities") {
		t.Fatalf("the image's binary, started by the framework, does not serve through kube-apiserver: %v\n%s", err, out)
	}
	if err := e.cp.UnregisterPlatform(t.Context()); err != nil {
		t.Fatal(err)
	}
	e.helm = toolDir(t, e.root, "helm")
	e.prepareWorkDir(t)

	t.Run("dry-run of every packaging variant", e.testDryRuns)
	t.Run("kustomize as the README says", e.testKustomize)
	t.Run("helm as the README says", e.testHelm)
}

// buildImage runs `make image` for this machine's platform, or
// takes PLATFORM_IMAGE_ARCHIVE (an archive make image already wrote).
func buildImage(t *testing.T, root string) string {
	t.Helper()
	if a := os.Getenv("PLATFORM_IMAGE_ARCHIVE"); a != "" {
		return a
	}
	out := filepath.Join(t.TempDir(), "image")
	start := time.Now()
	// The README's `make image`, for this machine's platform only.
	cmd := exec.CommandContext(t.Context(), "make", "--no-print-directory", "image",
		"IMAGE=platform-apiserver:test", "PLATFORMS=linux/"+runtime.GOARCH, "IMAGE_DIR="+out)
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build the image: %v\n%s", err, b)
	}
	t.Logf("built the image in %s", time.Since(start).Round(time.Second))
	return filepath.Join(out, "platform-apiserver.tar")
}

// checkImage unpacks the image and checks what a cluster operator relies on.
func checkImage(t *testing.T, archive string) *framework.Image {
	t.Helper()
	img, err := framework.UnpackImage(archive, "", filepath.Join(t.TempDir(), "rootfs"))
	if err != nil {
		t.Fatal(err)
	}
	if img.Config.User != "65532:65532" {
		t.Errorf("image config runs as %q, want the nonroot user 65532:65532", img.Config.User)
	}
	if got := img.Config.Entrypoint; len(got) != 1 || got[0] != "/usr/local/bin/platform-apiserver" {
		t.Errorf("entrypoint %v", got)
	}
	var files []string
	err = filepath.WalkDir(img.RootFS, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(img.RootFS, p)
		if !d.IsDir() {
			files = append(files, rel)
		}
		if base := filepath.Base(p); base == "sh" || base == "bash" || base == "busybox" {
			t.Errorf("the image holds a shell: %s", rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) > 6 {
		t.Errorf("the image holds more than the binary, CA certificates, passwd, group and nsswitch.conf: %v", files)
	}
	f, err := elf.Open(img.Entrypoint())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Error("the binary is dynamically linked (has an ELF interpreter); the image has no libc")
		}
	}
	f.Close()
	out, err := exec.CommandContext(t.Context(), "chroot", "--userspec=65532:65532", img.RootFS,
		"/usr/local/bin/platform-apiserver", "--help").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "platform-apiserver is a Kubernetes aggregated API server") {
		t.Fatalf("--help from the unpacked image as 65532: %v\n%s", err, out)
	}
	return img
}

// toolDir returns the directory hack/build-tools.sh puts name in.
func toolDir(t *testing.T, root, name string) string {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), filepath.Join(root, "hack/build-tools.sh"), name)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("hack/build-tools.sh %s: %v\n%s", name, err, stderr.String())
	}
	return strings.TrimSpace(string(out))
}

// prepareWorkDir makes the directory the README's commands run in, as a
// user's checkout would be: the certificate files and artifacts/.
func (e *installEnv) prepareWorkDir(t *testing.T) {
	e.work = t.TempDir()
	if err := os.Symlink(filepath.Join(e.root, "artifacts"), filepath.Join(e.work, "artifacts")); err != nil {
		t.Fatal(err)
	}
	var err error
	if e.cert, err = framework.IssueServingCert("platform-apiserver.platform-system.svc"); err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string][]byte{"tls.crt": e.cert.CertPEM, "tls.key": e.cert.KeyPEM, "ca.crt": e.cert.CAPEM} {
		if err := os.WriteFile(filepath.Join(e.work, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	e.shellEnv = append(os.Environ(),
		"KUBECONFIG="+e.cp.AdminKubeconfig(),
		"KUBECACHEDIR="+filepath.Join(e.work, ".kube-cache"),
		"HELM_CACHE_HOME="+filepath.Join(e.work, ".helm/cache"),
		"HELM_CONFIG_HOME="+filepath.Join(e.work, ".helm/config"),
		"HELM_DATA_HOME="+filepath.Join(e.work, ".helm/data"),
		"PATH="+e.cp.BinDir()+":"+e.helm+":"+os.Getenv("PATH"),
		"IMAGE_REPOSITORY=platform-apiserver", "IMAGE_TAG=test",
	)
}

// sh runs one command in the README's directory, as a user's shell would.
func (e *installEnv) sh(ctx context.Context, t *testing.T, command string, env ...string) string {
	t.Helper()
	cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", command)
	cmd.Dir = e.work
	cmd.Env = append(append([]string(nil), e.shellEnv...), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", command, err, out)
	}
	return string(out)
}

// testDryRuns checks every packaging variant against the real API, without
// changing anything.
func (e *installEnv) testDryRuns(t *testing.T) {
	ctx := t.Context()
	if err := e.cp.InstallCRDs(ctx, framework.PinnedCRDs); err != nil {
		t.Fatal(err)
	}
	overlays := map[string][]string{
		"base":             nil,
		"ha":               {"ha"},
		"monitoring":       {"monitoring"},
		"cert-manager":     {"cert-manager"},
		"network-policy":   {"network-policy"},
		"kueue-dispatcher": {"kueue-dispatcher"},
		"all":              {"ha", "monitoring", "cert-manager", "network-policy", "kueue-dispatcher"},
	}
	for name, components := range overlays {
		dir := filepath.Join(e.work, "dry-run", name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		k := "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- ../../artifacts/kustomize/base\n"
		if len(components) > 0 {
			k += "components:\n"
			for _, c := range components {
				k += "- ../../artifacts/kustomize/components/" + c + "\n"
			}
		}
		if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o644); err != nil {
			t.Fatal(err)
		}
		out := e.sh(ctx, t, "kubectl apply --dry-run=server -k dry-run/"+name)
		if !strings.Contains(out, "deployment.apps/platform-apiserver created (server dry run)") {
			t.Errorf("kustomize %s: the dry run did not create the Deployment:\n%s", name, out)
		}
		if slices.Contains(components, "network-policy") && !strings.Contains(out, "networkpolicy.networking.k8s.io/platform-apiserver created (server dry run)") {
			t.Errorf("kustomize %s: the dry run did not create the NetworkPolicy:\n%s", name, out)
		}
		if !strings.Contains(out, "namespace/platform-system created (server dry run)") && !strings.Contains(out, "namespace/platform-system configured (server dry run)") &&
			!strings.Contains(out, "namespace/platform-system unchanged (server dry run)") {
			t.Errorf("kustomize %s: the dry run did not apply the Namespace:\n%s", name, out)
		}
	}
	chart := "artifacts/chart/platform-apiserver"
	e.sh(ctx, t, "helm lint --strict "+chart+" && helm lint --strict "+chart+" -f "+chart+"/values-ha.yaml")
	helmVariants := map[string]string{
		"default":                 "",
		"ha":                      "-f " + chart + "/values-ha.yaml --set-file tls.caCert=ca.crt",
		"cert-manager+monitoring": "--set tls.certManager.enabled=true --set monitoring.serviceMonitor.enabled=true --set monitoring.metricsReader.enabled=true",
		"kueue-dispatcher":        "--set kueueDispatcher.enabled=true",
	}
	for name, args := range helmVariants {
		file := filepath.Join("dry-run", "helm-"+name+".yaml")
		e.sh(ctx, t, "helm template platform-apiserver "+chart+" --namespace platform-system "+args+" > "+file)
		out := e.sh(ctx, t, "kubectl apply --dry-run=server -f "+file)
		if !strings.Contains(out, "deployment.apps/platform-apiserver created (server dry run)") {
			t.Errorf("helm %s: the dry run did not create the Deployment:\n%s", name, out)
		}
		if name == "ha" && !strings.Contains(out, "networkpolicy.networking.k8s.io/platform-apiserver created (server dry run)") {
			t.Errorf("helm ha: the dry run did not create the NetworkPolicy:\n%s", out)
		}
	}

	// The chart and the kustomize base make the same choices.
	base := parseDocs(t, e.sh(ctx, t, "kubectl kustomize dry-run/base"))
	chartDefault := parseDocs(t, e.sh(ctx, t, "cat dry-run/helm-default.yaml"))
	for _, path := range [][]string{
		{"spec", "template", "spec", "containers"},
		{"spec", "template", "spec", "volumes"},
		{"spec", "template", "spec", "securityContext"},
		{"spec", "template", "spec", "serviceAccountName"},
		{"spec", "replicas"},
	} {
		b, h := field(base, "Deployment", "platform-apiserver", path...), field(chartDefault, "Deployment", "platform-apiserver", path...)
		// The image and pull policy are the chart's own values.
		b, h = dropImage(b), dropImage(h)
		if fmt.Sprint(b) != fmt.Sprint(h) {
			t.Errorf("Deployment %v differs between the kustomize base and the chart:\nbase:  %v\nchart: %v", path, b, h)
		}
	}
	for _, kind := range []string{"ClusterRole", "Role"} {
		for _, name := range []string{"platform-apiserver:discovery", "platform-apiserver:discovery-leases", "platform-apiserver:priority-and-fairness", "platform-viewer", "platform-capacity-viewer", "platform-fleet-viewer"} {
			b, h := field(base, kind, name, "rules"), field(chartDefault, kind, name, "rules")
			if fmt.Sprint(b) != fmt.Sprint(h) {
				t.Errorf("%s %s rules differ between the kustomize base and the chart:\nbase:  %v\nchart: %v", kind, name, b, h)
			}
		}
	}
	if b, h := field(base, "FlowSchema", "platform-apiserver-discovery-leases", "spec"), field(chartDefault, "FlowSchema", "platform-apiserver-discovery-leases", "spec"); b == nil || fmt.Sprint(b) != fmt.Sprint(h) {
		t.Errorf("FlowSchema platform-apiserver-discovery-leases differs between the kustomize base and the chart (or is missing):\nbase:  %v\nchart: %v", b, h)
	}
	if b, h := objectNames(base, "Namespace"), objectNames(chartDefault, "Namespace"); fmt.Sprint(b) != fmt.Sprint(h) {
		t.Errorf("the kustomize base and the chart make different objects:\nbase:  %v\nchart: %v", b, h)
	}
	// The dispatcher's install: the same objects, rules and container.
	dispatcher := parseDocs(t, e.sh(ctx, t, "kubectl kustomize dry-run/kueue-dispatcher"))
	chartDispatcher := parseDocs(t, e.sh(ctx, t, "cat dry-run/helm-kueue-dispatcher.yaml"))
	for _, c := range []struct {
		kind string
		path []string
	}{
		{"ClusterRole", []string{"rules"}},
		{"ClusterRoleBinding", []string{"subjects"}},
		{"Deployment", []string{"spec", "strategy"}},
		{"Deployment", []string{"spec", "template", "spec", "containers"}},
	} {
		b, h := field(dispatcher, c.kind, "platform-kueue-dispatcher", c.path...), field(chartDispatcher, c.kind, "platform-kueue-dispatcher", c.path...)
		if b, h = dropImage(b), dropImage(h); b == nil || fmt.Sprint(b) != fmt.Sprint(h) {
			t.Errorf("platform-kueue-dispatcher %s %v differs between the kustomize component and the chart (or is missing):\nkustomize: %v\nchart:     %v", c.kind, c.path, b, h)
		}
	}
	ha := parseDocs(t, e.sh(ctx, t, "kubectl kustomize dry-run/ha"))
	chartHA := parseDocs(t, e.sh(ctx, t, "cat dry-run/helm-ha.yaml"))
	for _, path := range [][]string{
		{"spec", "replicas"}, {"spec", "strategy"},
		{"spec", "template", "spec", "priorityClassName"},
	} {
		if b, h := field(ha, "Deployment", "platform-apiserver", path...), field(chartHA, "Deployment", "platform-apiserver", path...); fmt.Sprint(b) != fmt.Sprint(h) || b == nil {
			t.Errorf("HA Deployment %v: kustomize %v, chart %v", path, b, h)
		}
	}
	if b, h := field(ha, "PodDisruptionBudget", "platform-apiserver", "spec", "minAvailable"), field(chartHA, "PodDisruptionBudget", "platform-apiserver", "spec", "minAvailable"); fmt.Sprint(b) != fmt.Sprint(h) || b == nil {
		t.Errorf("HA PodDisruptionBudget minAvailable: kustomize %v, chart %v", b, h)
	}
	// The network-policy component and the chart's HA profile: one policy.
	netpol := parseDocs(t, e.sh(ctx, t, "kubectl kustomize dry-run/network-policy"))
	for _, path := range [][]string{{"spec", "policyTypes"}, {"spec", "ingress"}, {"spec", "egress"}} {
		if b, h := field(netpol, "NetworkPolicy", "platform-apiserver", path...), field(chartHA, "NetworkPolicy", "platform-apiserver", path...); fmt.Sprint(b) != fmt.Sprint(h) || b == nil {
			t.Errorf("NetworkPolicy %v: kustomize %v, chart %v", path, b, h)
		}
	}

	// The monitoring component and the chart ship the same alerts (both
	// from the chart's files/alerts.rules.yaml; hack/verify-alerts.sh).
	monitoring := parseDocs(t, e.sh(ctx, t, "kubectl kustomize dry-run/monitoring"))
	chartMonitoring := parseDocs(t, e.sh(ctx, t, "cat dry-run/helm-cert-manager+monitoring.yaml"))
	if b, h := field(monitoring, "PrometheusRule", "platform-apiserver", "spec"), field(chartMonitoring, "PrometheusRule", "platform-apiserver", "spec"); fmt.Sprint(b) != fmt.Sprint(h) || b == nil {
		t.Errorf("PrometheusRule spec: kustomize %v, chart %v", b, h)
	}
	// And the same Grafana dashboard, in a ConfigMap Grafana's sidecar
	// loads by its label (docs/monitoring.md; hack/verify-alerts.sh).
	const dashboard = "platform-apiserver-dashboard"
	for render, objs := range map[string][]*unstructured.Unstructured{"kustomize": monitoring, "chart": chartMonitoring} {
		if l := field(objs, "ConfigMap", dashboard, "metadata", "labels", "grafana_dashboard"); l != "1" {
			t.Errorf("%s: ConfigMap %s label grafana_dashboard %v, want \"1\"", render, dashboard, l)
		}
		if js, _ := field(objs, "ConfigMap", dashboard, "data", "platform-apiserver.json").(string); !json.Valid([]byte(js)) {
			t.Errorf("%s: ConfigMap %s data platform-apiserver.json is not JSON: %.200q", render, dashboard, js)
		}
	}
	if b, h := field(monitoring, "ConfigMap", dashboard, "data"), field(chartMonitoring, "ConfigMap", dashboard, "data"); fmt.Sprint(b) != fmt.Sprint(h) {
		t.Errorf("ConfigMap %s data differs between the kustomize component and the chart: kustomize %.200v, chart %.200v", dashboard, b, h)
	}

	// Every variant's pod is admitted under the base Namespace's
	// enforce=restricted.
	e.preparePodSecurity(t, base)
	for name := range overlays {
		e.dryRunPodSecurity(t, "kustomize-"+name, parseDocs(t, e.sh(ctx, t, "kubectl kustomize dry-run/"+name)))
	}
	for name := range helmVariants {
		e.dryRunPodSecurity(t, "helm-"+strings.ReplaceAll(name, "+", "-"), parseDocs(t, e.sh(ctx, t, "cat dry-run/helm-"+name+".yaml")))
	}
}

// testKustomize runs the README's kustomize commands.
func (e *installEnv) testKustomize(t *testing.T) {
	dsn := pgtest.NewTestDatabase(t)
	e.createNode(t, "install-kustomize-node")
	var pod *framework.Pod
	out := e.runREADME(t, "kustomize", dsn, &pod)
	e.checkInstalled(t, pod, out, "install-kustomize-node")
	eventually(t, "the member from platform-apiserver-members mirrored as member-2", mirrorTimeout, func(ctx context.Context) (bool, string) {
		out, _, err := e.cp.Kubectl(ctx, "get", "nodecapacity", "member-2.install-kustomize-node", "-o", "name")
		return err == nil && strings.TrimSpace(out) != "", fmt.Sprint(out, err)
	})
	e.checkMetricsRBAC(t, pod)

	// Upgrades: migrate status, in the pod, as the README says.
	for _, cmd := range readmeCommands(t, "migrate") {
		got := e.execInPod(t, pod, cmd+" --postgres-allow-insecure") // the test's database has no TLS
		if !strings.Contains(got, "001_registry") || !strings.Contains(got, " applied, 0 pending") {
			t.Errorf("%s: want every migration applied (the server migrated at start-up):\n%s", cmd, got)
		}
	}

	e.stopPod(t, pod)
	readmeMentions(t, "`kubectl delete -k platform-install`")
	e.sh(t.Context(), t, "kubectl delete -k platform-install")
	e.waitUninstalled(t)
}

// testHelm runs the README's Helm commands.
func (e *installEnv) testHelm(t *testing.T) {
	dsn := pgtest.NewTestDatabase(t)
	e.createNode(t, "install-helm-node")
	var pod *framework.Pod
	out := e.runREADME(t, "helm", dsn, &pod)
	e.checkInstalled(t, pod, out, "install-helm-node")
	e.stopPod(t, pod)
	readmeMentions(t, "`helm uninstall platform-apiserver --namespace platform-system`")
	e.sh(t.Context(), t, "helm uninstall platform-apiserver --namespace platform-system")
	if _, _, err := e.cp.Kubectl(t.Context(), "get", "apiservice", installAPI); err == nil {
		t.Error("helm uninstall left the APIService")
	}
}

// runREADME runs the README block name command by command. Where the README
// waits for the APIService, a kubelet would be starting the pod: the test
// starts it there from the applied Deployment and routes the Service to it.
// It returns the last command's output.
func (e *installEnv) runREADME(t *testing.T, name, dsn string, pod **framework.Pod) string {
	t.Helper()
	ctx := t.Context()
	var out string
	for _, cmd := range readmeCommands(t, name) {
		if strings.HasPrefix(cmd, "kubectl wait ") {
			if name == "kustomize" {
				// A further member, as the README says: a key of
				// platform-apiserver-members named by its cluster id (this
				// same cluster, through the admin's kubeconfig).
				e.sh(ctx, t, "kubectl -n platform-system create secret generic platform-apiserver-members --from-file=member-2=\"$KUBECONFIG\"")
			}
			p, err := e.cp.RunDeploymentPod(ctx, framework.PodOptions{
				Namespace: installNamespace, Deployment: "platform-apiserver", Name: name,
				ImageArchive: e.archive, ServingCA: e.cert.CAPEM,
				// The test's database ($DSN) has no TLS: sslmode=disable.
				ExtraArgs: []string{"--postgres-allow-insecure"},
			})
			if err != nil {
				t.Fatalf("run the Deployment's pod: %v", err)
			}
			*pod = p
			t.Cleanup(func() { _ = p.Stop() })
			if err := e.cp.RouteServiceToLoopback(ctx, installNamespace, "platform-apiserver", installAPI, p.Port()); err != nil {
				t.Fatal(err)
			}
		}
		out = e.sh(ctx, t, cmd, "DSN="+dsn)
	}
	return out
}

// checkInstalled checks what an installed server must do with the
// manifests' RBAC alone.
func (e *installEnv) checkInstalled(t *testing.T, pod *framework.Pod, lastOutput, node string) {
	t.Helper()
	ctx := t.Context()
	if pod == nil {
		t.Fatal("the README block never waited for the APIService, so no pod ran")
	}
	// kubectl get nodecapacities, the README's last command: the hosting
	// cluster's node, mirrored under the manifests' --cluster-id.
	if !strings.Contains(lastOutput, "hosting."+node) {
		t.Errorf("kubectl get nodecapacities lacks hosting.%s:\n%s", node, lastOutput)
	}
	eventually(t, "kube-system mirrored as a ClusterNamespace of hosting", mirrorTimeout, func(ctx context.Context) (bool, string) {
		out, _, err := e.cp.Kubectl(ctx, "get", "clusternamespace", "hosting", "-n", "kube-system", "-o", "jsonpath={.status.phase}")
		return err == nil && out == "Active", fmt.Sprint(out, err)
	})
	// In-cluster config, the ServiceAccount's token, the pod's user.
	args := strings.Join(pod.Args(), " ")
	for _, flag := range []string{"--kubeconfig", "--authentication-kubeconfig", "--authorization-kubeconfig", "--postgres-dsn="} {
		if strings.Contains(args, flag) {
			t.Errorf("the pod ran with %s: it must use the in-cluster config and the DSN file (%s)", flag, args)
		}
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pod.PID()))
	if err != nil || !strings.Contains(string(status), "\nUid:\t65532\t") {
		t.Errorf("the pod does not run as 65532: %v\n%s", err, status)
	}
	// Discovery's Leases, in the server's namespace.
	out, _, err := e.cp.Kubectl(ctx, "get", "leases", "-n", installNamespace, "-l", leaseSetLabel+"=platform-apiserver-discovery", "-o", "name")
	if err != nil || !strings.Contains(out, "platform-apiserver-discovery-member-hosting") || !strings.Contains(out, "platform-apiserver-discovery-replica-") {
		t.Errorf("discovery Leases in %s: %v\n%s", installNamespace, err, out)
	}
	// The manifests' FlowSchema puts those Leases' requests at the
	// leader-election priority level: kube-apiserver counts them there.
	eventually(t, "discovery's Lease requests dispatched by the manifests' FlowSchema", mirrorTimeout, func(ctx context.Context) (bool, string) {
		out, _, err := e.cp.Kubectl(ctx, "get", "--raw", "/metrics")
		if err != nil {
			return false, err.Error()
		}
		lines := grepLines(out, `apiserver_flowcontrol_dispatched_requests_total{flow_schema="platform-apiserver-discovery-leases",priority_level="leader-election"}`)
		return lines != "", "kube-apiserver's apiserver_flowcontrol_dispatched_requests_total has no line for the FlowSchema at leader-election"
	})
	logs, err := os.ReadFile(pod.LogPath())
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(strings.ToLower(string(logs)), "forbidden") {
		t.Errorf("the server was refused something with the manifests' RBAC; see %s:\n%s", pod.LogPath(), grepLines(string(logs), "orbidden"))
	}
}

// checkMetricsRBAC: GET /metrics with a token of Prometheus's ServiceAccount,
// allowed by the monitoring component's ClusterRole and refused without it.
func (e *installEnv) checkMetricsRBAC(t *testing.T, pod *framework.Pod) {
	t.Helper()
	ctx := t.Context()
	e.sh(ctx, t, "kubectl create namespace monitoring && kubectl -n monitoring create serviceaccount prometheus-k8s && kubectl -n monitoring create serviceaccount other")
	e.sh(ctx, t, "kubectl apply -f artifacts/kustomize/components/monitoring/metrics-reader.yaml")
	get := func(sa string) (int, string) {
		token, err := e.cp.ServiceAccountToken(ctx, "monitoring", sa)
		if err != nil {
			t.Fatal(err)
		}
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(e.cert.CAPEM)
		hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: "platform-apiserver.platform-system.svc"}}}
		var code int
		var body string
		_ = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("https://127.0.0.1:%d/metrics", pod.Port()), nil)
			req.Header.Set("Authorization", "Bearer "+token)
			resp, err := hc.Do(req)
			if err != nil {
				body = err.Error()
				return false, nil
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			code, body = resp.StatusCode, string(b)
			// Authorization decisions are cached briefly; RBAC may still be landing.
			return sa != "prometheus-k8s" || code == http.StatusOK, nil
		})
		return code, body
	}
	if code, body := get("prometheus-k8s"); code != http.StatusOK || !strings.Contains(body, "platform_discovery_") {
		t.Errorf("GET /metrics as monitoring/prometheus-k8s: %d, want 200 with platform_discovery_ metrics:\n%.300s", code, body)
	}
	if code, _ := get("other"); code != http.StatusForbidden {
		t.Errorf("GET /metrics as monitoring/other (no binding): %d, want 403", code)
	}
}

// stopPod stops the pod as a rollout would (SIGTERM) and checks that it
// gave its Leases back with the manifests' RBAC: the presence Lease deleted,
// nothing refused on the way out.
func (e *installEnv) stopPod(t *testing.T, pod *framework.Pod) {
	t.Helper()
	if err := pod.Stop(); err != nil {
		t.Error(err)
	}
	out, _, err := e.cp.Kubectl(t.Context(), "get", "leases", "-n", installNamespace, "-l", leaseSetLabel+"=platform-apiserver-discovery", "-o", "name")
	if err != nil || strings.Contains(out, "platform-apiserver-discovery-replica-") {
		t.Errorf("the stopped server's presence Lease is still there (%v):\n%s", err, out)
	}
	if logs, err := os.ReadFile(pod.LogPath()); err != nil || strings.Contains(strings.ToLower(string(logs)), "forbidden") {
		t.Errorf("the server was refused something while stopping (%v):\n%s", err, grepLines(string(logs), "orbidden"))
	}
}

// execInPod runs `kubectl -n NS exec deploy/NAME -- COMMAND` in the pod the
// test kubelet runs.
func (e *installEnv) execInPod(t *testing.T, pod *framework.Pod, cmd string) string {
	t.Helper()
	prefix := "kubectl -n " + installNamespace + " exec deploy/platform-apiserver -- "
	if !strings.HasPrefix(cmd, prefix) {
		t.Fatalf("README command %q is not a kubectl exec into the Deployment", cmd)
	}
	out, err := pod.Exec(t.Context(), strings.Fields(strings.TrimPrefix(cmd, prefix))...)
	if err != nil {
		t.Fatalf("%s: %v\n%s", cmd, err, out)
	}
	return out
}

func (e *installEnv) createNode(t *testing.T, name string) {
	t.Helper()
	client, err := newKubeClient(e.cp)
	if err != nil {
		t.Fatal(err)
	}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Status: corev1.NodeStatus{
			Capacity:    corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("16Gi"), corev1.ResourcePods: resource.MustParse("110")},
			Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("16Gi"), corev1.ResourcePods: resource.MustParse("110")},
		},
	}
	if _, err := client.CoreV1().Nodes().Create(t.Context(), node, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

// waitUninstalled waits until the namespace and the APIService are gone.
func (e *installEnv) waitUninstalled(t *testing.T) {
	t.Helper()
	eventually(t, "platform-system and the APIService deleted", 2*time.Minute, func(ctx context.Context) (bool, string) {
		ns, _, nsErr := e.cp.Kubectl(ctx, "get", "namespace", installNamespace, "--ignore-not-found", "-o", "name")
		api, _, apiErr := e.cp.Kubectl(ctx, "get", "apiservice", installAPI, "--ignore-not-found", "-o", "name")
		return nsErr == nil && apiErr == nil && ns == "" && api == "", ns + api
	})
}

func grepLines(s, sub string) string {
	var out []string
	for l := range strings.SplitSeq(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
