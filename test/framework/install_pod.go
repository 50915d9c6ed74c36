package framework

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// PodOptions say which Deployment's pod RunDeploymentPod runs, from which
// image, and the few things a loopback test must change.
type PodOptions struct {
	// Namespace and Deployment name the applied Deployment whose pod
	// template is run (its first container).
	Namespace, Deployment string
	// Name tells pods of one Deployment apart (log file, pod name).
	Name string
	// ImageArchive is the image archive (make image) whose filesystem the
	// container runs in, as its entrypoint, chrooted, with the user of the
	// pod's securityContext (else the image's).
	ImageArchive string
	// ExtraArgs are appended to the container's arguments. RunDeploymentPod
	// itself appends --bind-address=127.0.0.1 and --secure-port=<free port>:
	// tests listen on loopback only, and no Service routes to a pod IP here.
	ExtraArgs []string
	// ServingCA verifies the pod's serving certificate for the readiness check.
	ServingCA []byte
}

// Pod is a Deployment's container running as a kubelet would run it.
type Pod struct {
	proc     *process
	port     int
	args     []string
	env      []string
	root     string
	uid, gid string
}

// PID is the container's process id on the host.
func (p *Pod) PID() int { return p.proc.pid() }

// Exec runs a command in the container, as `kubectl exec` would: same
// filesystem, environment and user. It returns the combined output.
func (p *Pod) Exec(ctx context.Context, command ...string) (string, error) {
	chroot, err := lookChroot()
	if err != nil {
		return "", err
	}
	args := append(append([]string{"-i"}, p.env...), chroot, "--userspec="+p.uid+":"+p.gid, p.root)
	out, err := exec.CommandContext(ctx, "/usr/bin/env", append(args, command...)...).CombinedOutput()
	return string(out), err
}

// Port is the pod's secure port on 127.0.0.1.
func (p *Pod) Port() int { return p.port }

// Args are the container's arguments after $(VAR) expansion and the loopback overrides.
func (p *Pod) Args() []string { return append([]string(nil), p.args...) }

// Env is the container's environment as the process got it.
func (p *Pod) Env() []string { return append([]string(nil), p.env...) }

// RootFS is the container's root directory on the host.
func (p *Pod) RootFS() string { return p.root }

// LogPath is the file the container's output goes to.
func (p *Pod) LogPath() string { return p.proc.logPath() }

// Stop ends the container (SIGTERM, then SIGKILL after a grace period).
func (p *Pod) Stop() error { return p.proc.stop() }

// Exited reports whether the container has ended.
func (p *Pod) Exited() bool { done, _ := p.proc.exited(); return done }

// RunDeploymentPod runs the pod of an applied Deployment the way a kubelet
// would, without a container runtime: the image's filesystem is unpacked to
// a fresh root directory; the pod's Secret volumes (and the optional ones that
// are missing, as empty directories), its ServiceAccount's token (a
// TokenRequest for the pod's serviceAccountName, with the cluster CA and the
// namespace, at /var/run/secrets/kubernetes.io/serviceaccount) are written at
// their mount paths; the environment resolves fieldRef, secretKeyRef and
// configMapKeyRef, plus KUBERNETES_SERVICE_HOST/PORT pointing at
// kube-apiserver; arguments expand $(VAR); and the entrypoint runs chrooted
// there as the pod's user. So the binary sees exactly what it would see in the
// cluster: in-cluster config, mounted Secrets, no write access outside /tmp.
// It needs root (chroot). It waits until /readyz answers 200.
func (cp *ControlPlane) RunDeploymentPod(ctx context.Context, o PodOptions) (*Pod, error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("running a pod from the image's filesystem needs root (chroot)")
	}
	client, err := kubernetes.NewForConfig(cp.adminConfig)
	if err != nil {
		return nil, err
	}
	dep, err := client.AppsV1().Deployments(o.Namespace).Get(ctx, o.Deployment, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("read the Deployment to run: %w", err)
	}
	spec := dep.Spec.Template.Spec
	if len(spec.Containers) == 0 {
		return nil, fmt.Errorf("deployment %s/%s has no container", o.Namespace, o.Deployment)
	}
	c := spec.Containers[0]
	podName := o.Deployment + "-" + o.Name
	dir := filepath.Join(cp.workDir, "pods", podName)
	if err := os.RemoveAll(dir); err != nil {
		return nil, err
	}
	img, err := UnpackImage(o.ImageArchive, "", filepath.Join(dir, "rootfs"))
	if err != nil {
		return nil, err
	}
	root := img.RootFS

	// Volumes at their mount paths.
	volumes := map[string]corev1.Volume{}
	for _, v := range spec.Volumes {
		volumes[v.Name] = v
	}
	for _, m := range c.VolumeMounts {
		v, ok := volumes[m.Name]
		if !ok {
			return nil, fmt.Errorf("volume mount %s names no volume", m.Name)
		}
		files, err := cp.volumeFiles(ctx, client, o.Namespace, v)
		if err != nil {
			return nil, fmt.Errorf("volume %s: %w", m.Name, err)
		}
		if err := writeVolume(filepath.Join(root, m.MountPath), files); err != nil {
			return nil, err
		}
	}
	// The ServiceAccount token, as the kubelet projects it.
	if ptr.Deref(spec.AutomountServiceAccountToken, true) {
		sa := spec.ServiceAccountName
		if sa == "" {
			sa = "default"
		}
		tr, err := client.CoreV1().ServiceAccounts(o.Namespace).CreateToken(ctx, sa, &authenticationv1.TokenRequest{
			Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)},
		}, metav1.CreateOptions{})
		if err != nil {
			return nil, fmt.Errorf("TokenRequest for ServiceAccount %s/%s: %w", o.Namespace, sa, err)
		}
		if err := writeVolume(filepath.Join(root, "var/run/secrets/kubernetes.io/serviceaccount"), map[string][]byte{
			"token":     []byte(tr.Status.Token),
			"ca.crt":    cp.pki.clusterCA.certPEM,
			"namespace": []byte(o.Namespace),
		}); err != nil {
			return nil, err
		}
	}

	// Environment.
	apiURL, err := url.Parse(cp.apiServerURL)
	if err != nil {
		return nil, err
	}
	env := map[string]string{}
	var order []string
	set := func(k, v string) {
		if _, ok := env[k]; !ok {
			order = append(order, k)
		}
		env[k] = v
	}
	for _, kv := range img.Config.Env {
		k, v, _ := strings.Cut(kv, "=")
		set(k, v)
	}
	set("HOSTNAME", podName)
	set("KUBERNETES_SERVICE_HOST", apiURL.Hostname())
	set("KUBERNETES_SERVICE_PORT", apiURL.Port())
	for _, e := range c.Env {
		v, err := cp.envValue(ctx, client, o.Namespace, podName, spec, e)
		if err != nil {
			return nil, fmt.Errorf("env %s: %w", e.Name, err)
		}
		set(e.Name, expand(v, env))
	}
	var environ []string
	for _, k := range order {
		environ = append(environ, k+"="+env[k])
	}

	// Command line.
	command := img.Config.Entrypoint
	if len(c.Command) > 0 {
		command = c.Command
	}
	args := img.Config.Cmd
	if len(c.Args) > 0 || len(c.Command) > 0 {
		args = c.Args
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	var expanded []string
	for _, a := range args {
		expanded = append(expanded, expand(a, env))
	}
	expanded = append(expanded, o.ExtraArgs...)
	expanded = append(expanded, "--bind-address=127.0.0.1", "--secure-port="+strconv.Itoa(port))

	uid, gid := userOf(spec, c, img.Config.User)
	chrootArgs := append([]string{"--userspec=" + uid + ":" + gid, root}, command...)
	chrootArgs = append(chrootArgs, expanded...)
	chroot, err := lookChroot()
	if err != nil {
		return nil, err
	}
	// env -i: the container gets its own environment and nothing of ours.
	envArgs := append(append([]string{"-i"}, environ...), chroot)
	spec2 := processSpec{
		name: "pod-" + podName, path: "/usr/bin/env", args: append(envArgs, chrootArgs...), dir: cp.workDir, logDir: cp.workDir,
	}
	if cp.log != nil {
		spec2.extra = newPrefixWriter(spec2.name, cp.log)
	}
	proc, err := startProcess(ctx, spec2)
	if err != nil {
		return nil, err
	}
	pod := &Pod{proc: proc, port: port, args: expanded, env: environ, root: root, uid: uid, gid: gid}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(o.ServingCA)
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: "localhost"}}}
	readyURL := fmt.Sprintf("https://127.0.0.1:%d/readyz", port)
	if err := proc.waitReady(ctx, platformStartTimeout, func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, readyURL, nil)
		if err != nil {
			return err
		}
		resp, err := hc.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s: %s", readyURL, resp.Status)
		}
		return nil
	}); err != nil {
		_ = proc.stop()
		return nil, err
	}
	return pod, nil
}

func lookChroot() (string, error) {
	for _, p := range []string{"/usr/sbin/chroot", "/usr/bin/chroot", "/sbin/chroot"} {
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", errors.New("chroot (coreutils) not found")
}

// userOf is the pod's runAsUser/runAsGroup (container over pod), else the
// image's USER.
func userOf(spec corev1.PodSpec, c corev1.Container, imageUser string) (string, string) {
	uid, gid, _ := strings.Cut(imageUser, ":")
	if uid == "" {
		uid = "0"
	}
	if gid == "" {
		gid = uid
	}
	if sc := spec.SecurityContext; sc != nil {
		if sc.RunAsUser != nil {
			uid = strconv.FormatInt(*sc.RunAsUser, 10)
		}
		if sc.RunAsGroup != nil {
			gid = strconv.FormatInt(*sc.RunAsGroup, 10)
		}
	}
	if sc := c.SecurityContext; sc != nil {
		if sc.RunAsUser != nil {
			uid = strconv.FormatInt(*sc.RunAsUser, 10)
		}
		if sc.RunAsGroup != nil {
			gid = strconv.FormatInt(*sc.RunAsGroup, 10)
		}
	}
	return uid, gid
}

// volumeFiles returns the files a volume holds: a Secret's or ConfigMap's
// keys (or the items asked for); an optional one that is missing, or an
// emptyDir, is empty. Other kinds are not supported.
func (cp *ControlPlane) volumeFiles(ctx context.Context, client kubernetes.Interface, ns string, v corev1.Volume) (map[string][]byte, error) {
	pick := func(data map[string][]byte, items []corev1.KeyToPath) (map[string][]byte, error) {
		if len(items) == 0 {
			return data, nil
		}
		out := map[string][]byte{}
		for _, it := range items {
			b, ok := data[it.Key]
			if !ok {
				return nil, fmt.Errorf("key %s missing: the kubelet would not start the pod", it.Key)
			}
			out[it.Path] = b
		}
		return out, nil
	}
	switch {
	case v.Secret != nil:
		s, err := client.CoreV1().Secrets(ns).Get(ctx, v.Secret.SecretName, metav1.GetOptions{})
		if apierrors.IsNotFound(err) && ptr.Deref(v.Secret.Optional, false) {
			return map[string][]byte{}, nil
		}
		if err != nil {
			return nil, fmt.Errorf("secret %s (the kubelet would wait for it): %w", v.Secret.SecretName, err)
		}
		return pick(s.Data, v.Secret.Items)
	case v.ConfigMap != nil:
		m, err := client.CoreV1().ConfigMaps(ns).Get(ctx, v.ConfigMap.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) && ptr.Deref(v.ConfigMap.Optional, false) {
			return map[string][]byte{}, nil
		}
		if err != nil {
			return nil, fmt.Errorf("configmap %s: %w", v.ConfigMap.Name, err)
		}
		data := map[string][]byte{}
		for k, s := range m.Data {
			data[k] = []byte(s)
		}
		return pick(data, v.ConfigMap.Items)
	case v.EmptyDir != nil:
		return map[string][]byte{}, nil
	}
	return nil, fmt.Errorf("volume kind not supported by the test kubelet")
}

// writeVolume writes files under dir, readable by everyone as the kubelet's
// default mode 0644 makes them.
func writeVolume(dir string, files map[string][]byte) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for name, b := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// envValue resolves one container env entry.
func (cp *ControlPlane) envValue(ctx context.Context, client kubernetes.Interface, ns, podName string, spec corev1.PodSpec, e corev1.EnvVar) (string, error) {
	if e.ValueFrom == nil {
		return e.Value, nil
	}
	switch vf := e.ValueFrom; {
	case vf.FieldRef != nil:
		switch vf.FieldRef.FieldPath {
		case "metadata.namespace":
			return ns, nil
		case "metadata.name":
			return podName, nil
		case "spec.serviceAccountName":
			return spec.ServiceAccountName, nil
		case "spec.nodeName":
			return "localhost", nil
		case "status.podIP", "status.hostIP":
			return "127.0.0.1", nil
		}
		return "", fmt.Errorf("fieldRef %s not supported by the test kubelet", vf.FieldRef.FieldPath)
	case vf.SecretKeyRef != nil:
		s, err := client.CoreV1().Secrets(ns).Get(ctx, vf.SecretKeyRef.Name, metav1.GetOptions{})
		if err != nil {
			return "", err
		}
		b, ok := s.Data[vf.SecretKeyRef.Key]
		if !ok {
			return "", fmt.Errorf("secret %s has no key %s", vf.SecretKeyRef.Name, vf.SecretKeyRef.Key)
		}
		return string(b), nil
	case vf.ConfigMapKeyRef != nil:
		m, err := client.CoreV1().ConfigMaps(ns).Get(ctx, vf.ConfigMapKeyRef.Name, metav1.GetOptions{})
		if err != nil {
			return "", err
		}
		v, ok := m.Data[vf.ConfigMapKeyRef.Key]
		if !ok {
			return "", fmt.Errorf("configmap %s has no key %s", vf.ConfigMapKeyRef.Name, vf.ConfigMapKeyRef.Key)
		}
		return v, nil
	}
	return "", fmt.Errorf("valueFrom kind not supported by the test kubelet")
}

var varRef = regexp.MustCompile(`\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)`)

// expand replaces $(VAR) with VAR's value as the kubelet does: unknown
// references stay as they are, $$ is a literal $.
func expand(s string, env map[string]string) string {
	return varRef.ReplaceAllStringFunc(s, func(m string) string {
		if m == "$$" {
			return "$"
		}
		if v, ok := env[m[2:len(m)-1]]; ok {
			return v
		}
		return m
	})
}

// DeploymentPodTemplate returns the applied Deployment's pod template, for
// tests that check what a manifest asks of the kubelet.
func (cp *ControlPlane) DeploymentPodTemplate(ctx context.Context, ns, name string) (*appsv1.Deployment, error) {
	client, err := kubernetes.NewForConfig(cp.adminConfig)
	if err != nil {
		return nil, err
	}
	return client.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
}
