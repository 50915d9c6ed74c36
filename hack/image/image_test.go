package main

import (
	"archive/tar"
	"errors"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// testCACertificates stands for the build machine's CA bundle.
const testCACertificates = "-----BEGIN CERTIFICATE-----\nfake\n-----END CERTIFICATE-----\n"

// testInputs are the inputs of platform-apiserver's image with executable as
// the binary's bytes.
func testInputs(executable string, arch string) ImageInputs {
	return ImageInputs{
		Platform:       v1.Platform{OS: "linux", Architecture: arch},
		Binary:         DefaultBinary,
		Executable:     []byte(executable),
		CACertificates: []byte(testCACertificates),
		Created:        time.Unix(1764547200, 0).UTC(),
		Version:        "v0.1.0", Revision: "0123456789abcdef",
	}
}

func mustAssemble(t *testing.T, in ImageInputs) v1.Image {
	t.Helper()
	img, err := Assemble(in)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

func writeImage(t *testing.T, dir, ref string, images ...PlatformImage) BuildResult {
	t.Helper()
	r, err := name.ParseReference(ref)
	if err != nil {
		t.Fatal(err)
	}
	res, err := Write(dir, DefaultBinary, r, images)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// TestReproducible: the same inputs give the same digest and the same
// archive bytes; another binary, or the same bytes named otherwise, gives
// another digest.
func TestReproducible(t *testing.T) {
	var digests, archives []string
	for range 2 {
		img := mustAssemble(t, testInputs("binary", "amd64"))
		res := writeImage(t, t.TempDir(), "platform-apiserver:dev", PlatformImage{Platform: v1.Platform{OS: "linux", Architecture: "amd64"}, Image: img})
		sum, err := fileDigest(res.Archive)
		if err != nil {
			t.Fatal(err)
		}
		digests, archives = append(digests, res.Digest.String()), append(archives, sum)
	}
	if digests[0] != digests[1] || archives[0] != archives[1] {
		t.Fatalf("same inputs, different results: digests %v, archives %v", digests, archives)
	}
	other, err := mustAssemble(t, testInputs("another binary", "amd64")).Digest()
	if err != nil {
		t.Fatal(err)
	}
	if other.String() == digests[0] {
		t.Fatalf("a different binary gave the same digest %s", other)
	}
	renamed := testInputs("binary", "amd64")
	renamed.Binary = "platform-kueue-dispatcher"
	if d, err := mustAssemble(t, renamed).Digest(); err != nil || d.String() == digests[0] {
		t.Fatalf("the same binary named otherwise gave digest %s (%v), the same", d, err)
	}
}

// files reads an image's flattened filesystem: name → header and body.
func files(t *testing.T, img v1.Image) (map[string]*tar.Header, map[string][]byte) {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	headers, bodies := map[string]*tar.Header{}, map[string][]byte{}
	tr := tar.NewReader(rc)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		n := strings.TrimSuffix(hdr.Name, "/")
		headers[n], bodies[n] = hdr, b
	}
	return headers, bodies
}

// TestImageContents: the config runs the binary as nonroot; the filesystem
// is the binary, CA certificates, passwd/group and /tmp — no shell.
func TestImageContents(t *testing.T) {
	img := mustAssemble(t, testInputs("ELF...", "arm64"))
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.Config.User != "65532:65532" || len(cf.Config.Entrypoint) != 1 || cf.Config.Entrypoint[0] != "/usr/local/bin/platform-apiserver" {
		t.Errorf("config runs %v as %q, want [/usr/local/bin/platform-apiserver] as 65532:65532", cf.Config.Entrypoint, cf.Config.User)
	}
	if cf.OS != "linux" || cf.Architecture != "arm64" || !cf.Created.Equal(time.Unix(1764547200, 0)) {
		t.Errorf("config platform %s/%s created %v", cf.OS, cf.Architecture, cf.Created)
	}
	if got := cf.Config.Labels["org.opencontainers.image.revision"]; got != "0123456789abcdef" {
		t.Errorf("revision label %q", got)
	}
	headers, bodies := files(t, img)
	if string(bodies["usr/local/bin/platform-apiserver"]) != "ELF..." || headers["usr/local/bin/platform-apiserver"].Mode != 0o755 {
		t.Errorf("binary missing or not 0755: %+v", headers["usr/local/bin/platform-apiserver"])
	}
	if !strings.Contains(string(bodies["etc/passwd"]), "nonroot:x:65532:65532:") || !strings.Contains(string(bodies["etc/group"]), "nonroot:x:65532:") {
		t.Errorf("passwd/group lack nonroot:\n%s%s", bodies["etc/passwd"], bodies["etc/group"])
	}
	if !strings.Contains(string(bodies["etc/ssl/certs/ca-certificates.crt"]), "BEGIN CERTIFICATE") {
		t.Error("CA certificates missing")
	}
	if h := headers["tmp"]; h == nil || h.Mode != 0o1777 {
		t.Errorf("/tmp: %+v, want mode 1777", h)
	}
	if h := headers["home/nonroot"]; h == nil || h.Uid != NonrootUID {
		t.Errorf("/home/nonroot: %+v, want owned by 65532", h)
	}
	for n, h := range headers {
		if strings.HasPrefix(n, "bin") || strings.HasSuffix(n, "/sh") || strings.HasSuffix(n, "/bash") {
			t.Errorf("image holds %s: it must have no shell", n)
		}
		if !h.ModTime.Equal(time.Unix(1764547200, 0)) {
			t.Errorf("%s has time %v, want the source date", n, h.ModTime)
		}
	}
}

// TestArchiveFormats: the archive reads as a Docker archive (manifest.json,
// what docker load reads) and as an OCI layout (index.json, what podman load,
// ctr import and skopeo read), and both give the image that was written.
func TestArchiveFormats(t *testing.T) {
	img := mustAssemble(t, testInputs("binary", "amd64"))
	want, _ := img.Digest()
	res := writeImage(t, t.TempDir(), "registry.example.com/platform/platform-apiserver:v0.1.0",
		PlatformImage{Platform: v1.Platform{OS: "linux", Architecture: "amd64"}, Image: img})

	tag, _ := name.NewTag("registry.example.com/platform/platform-apiserver:v0.1.0")
	docker, err := tarball.ImageFromPath(res.Archive, &tag)
	if err != nil {
		t.Fatalf("read as a Docker archive: %v", err)
	}
	if got, _ := docker.ConfigName(); got.String() != mustConfigName(t, img) {
		t.Errorf("Docker archive config %s, want %s", got, mustConfigName(t, img))
	}
	if err := tarballLayersMatch(docker, img); err != nil {
		t.Error(err)
	}

	dir := t.TempDir()
	untar(t, res.Archive, dir)
	p, err := layout.FromPath(dir)
	if err != nil {
		t.Fatalf("read as an OCI layout: %v", err)
	}
	idx, err := p.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Manifests) != 1 || m.Manifests[0].Digest != want {
		t.Fatalf("index.json: %+v, want one entry %s", m.Manifests, want)
	}
	if got := m.Manifests[0].Annotations["io.containerd.image.name"]; got != "registry.example.com/platform/platform-apiserver:v0.1.0" {
		t.Errorf("io.containerd.image.name %q", got)
	}
	if got := m.Manifests[0].Annotations["org.opencontainers.image.ref.name"]; got != "v0.1.0" {
		t.Errorf("org.opencontainers.image.ref.name %q", got)
	}
	if _, err := os.Stat(filepath.Join(dir, "oci-layout")); err != nil {
		t.Error(err)
	}
}

func mustConfigName(t *testing.T, img v1.Image) string {
	t.Helper()
	h, err := img.ConfigName()
	if err != nil {
		t.Fatal(err)
	}
	return h.String()
}

func tarballLayersMatch(got, want v1.Image) error {
	gl, err := got.Layers()
	if err != nil {
		return err
	}
	wl, err := want.Layers()
	if err != nil {
		return err
	}
	if len(gl) != len(wl) {
		return errors.New("layer count differs")
	}
	for i := range gl {
		g, _ := gl[i].DiffID()
		w, _ := wl[i].DiffID()
		if g != w {
			return errors.New("layer " + g.String() + " != " + w.String())
		}
	}
	return nil
}

func untar(t *testing.T, archive, dir string) {
	t.Helper()
	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, filepath.FromSlash(hdr.Name))
		if hdr.Typeflag == tar.TypeDir {
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestPush pushes a two-platform image to a registry on 127.0.0.1 and reads
// back the index it built, platform by platform.
func TestPush(t *testing.T) {
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "http://")
	if !strings.HasPrefix(host, "127.0.0.1:") {
		t.Fatalf("test registry on %s, want loopback", host)
	}
	amd, arm := mustAssemble(t, testInputs("amd64 binary", "amd64")), mustAssemble(t, testInputs("arm64 binary", "arm64"))
	dir := t.TempDir()
	res := writeImage(t, dir, "platform-apiserver:dev",
		PlatformImage{Platform: v1.Platform{OS: "linux", Architecture: "amd64"}, Image: amd},
		PlatformImage{Platform: v1.Platform{OS: "linux", Architecture: "arm64"}, Image: arm})

	if _, err := Push(t.Context(), PushOptions{From: dir}); err == nil || !strings.Contains(err.Error(), "--image is required") {
		t.Errorf("push without --image: %v", err)
	}
	ref := host + "/platform/platform-apiserver:v0.1.0"
	pushed, err := Push(t.Context(), PushOptions{From: dir, Image: ref})
	if err != nil {
		t.Fatal(err)
	}
	if want := host + "/platform/platform-apiserver@" + res.Digest.String(); pushed != want {
		t.Errorf("Push returned %s, want %s", pushed, want)
	}
	r, _ := name.ParseReference(ref)
	idx, err := remote.Index(r, remote.WithContext(t.Context()))
	if err != nil {
		t.Fatal(err)
	}
	if d, _ := idx.Digest(); d != res.Digest {
		t.Errorf("registry has index %s, built %s", d, res.Digest)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	wantDigests := map[string]v1.Image{"amd64": amd, "arm64": arm}
	if len(m.Manifests) != 2 {
		t.Fatalf("index has %d manifests, want 2", len(m.Manifests))
	}
	for _, d := range m.Manifests {
		want, _ := wantDigests[d.Platform.Architecture].Digest()
		if d.Platform.OS != "linux" || d.Digest != want {
			t.Errorf("index entry %s/%s %s, want %s", d.Platform.OS, d.Platform.Architecture, d.Digest, want)
		}
	}
}

// repoImages are this repository's images: the package, the binary's name
// (hack/image's --binary) and the Dockerfile's target of each.
var repoImages = []struct{ pkg, binary, target string }{
	{"./cmd/apiserver", "platform-apiserver", "apiserver"},
	{"./cmd/kueue-dispatcher", "platform-kueue-dispatcher", "kueue-dispatcher"},
}

// TestBuildBinaryName: Build with --binary platform-kueue-dispatcher (a
// prebuilt stand-in for the binary) makes an image that holds and runs
// /usr/local/bin/platform-kueue-dispatcher and names it so, archived as
// platform-kueue-dispatcher.tar, the same twice over.
func TestBuildBinaryName(t *testing.T) {
	tmp := t.TempDir()
	ca, bin := filepath.Join(tmp, "ca.crt"), filepath.Join(tmp, "prebuilt")
	if err := os.WriteFile(ca, []byte(testCACertificates), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, []byte("dispatcher ELF..."), 0o755); err != nil {
		t.Fatal(err)
	}
	build := func(out string) BuildResult {
		t.Helper()
		res, err := Build(t.Context(), BuildOptions{
			Image: "platform-kueue-dispatcher:dev", Platforms: []string{"linux/amd64"}, Output: out,
			Package: "./cmd/kueue-dispatcher", Binary: "platform-kueue-dispatcher",
			Binaries:       map[string]string{"linux/amd64": bin},
			CACertificates: ca, Version: "v0.1.0", Revision: "0123456789abcdef", SourceDateEpoch: 1764547200,
		})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	out := filepath.Join(tmp, "out")
	res := build(out)
	if want := filepath.Join(out, "platform-kueue-dispatcher.tar"); res.Archive != want {
		t.Errorf("archive %s, want %s", res.Archive, want)
	}
	entries, err := os.ReadDir(out)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if strings.Join(names, " ") != "digest oci platform-kueue-dispatcher.tar" {
		t.Errorf("output holds %v, want digest, oci and platform-kueue-dispatcher.tar", names)
	}
	if again := build(filepath.Join(tmp, "again")); again.Digest != res.Digest {
		t.Errorf("same inputs, digests %s and %s", res.Digest, again.Digest)
	}

	tag, _ := name.NewTag("platform-kueue-dispatcher:dev")
	img, err := tarball.ImageFromPath(res.Archive, &tag)
	if err != nil {
		t.Fatalf("read %s as a Docker archive: %v", res.Archive, err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	const entrypoint = "/usr/local/bin/platform-kueue-dispatcher"
	if got := cf.Config.Entrypoint; len(got) != 1 || got[0] != entrypoint || cf.Config.User != "65532:65532" {
		t.Errorf("config runs %v as %q, want [%s] as 65532:65532", got, cf.Config.User, entrypoint)
	}
	if got := cf.Config.Labels["org.opencontainers.image.title"]; got != "platform-kueue-dispatcher" {
		t.Errorf("title label %q", got)
	}
	if got := cf.Config.Labels["org.opencontainers.image.description"]; !strings.Contains(got, "MultiKueue") {
		t.Errorf("description label %q is not the dispatcher's", got)
	}
	if n := len(cf.History); n != 2 || cf.History[1].Comment != "platform-kueue-dispatcher" || !strings.Contains(cf.History[1].CreatedBy, entrypoint) {
		t.Errorf("history %+v, want the binary's layer named platform-kueue-dispatcher", cf.History)
	}
	headers, bodies := files(t, img)
	if string(bodies["usr/local/bin/platform-kueue-dispatcher"]) != "dispatcher ELF..." || headers["usr/local/bin/platform-kueue-dispatcher"].Mode != 0o755 {
		t.Errorf("binary missing or not 0755: %+v", headers["usr/local/bin/platform-kueue-dispatcher"])
	}
	if _, ok := headers["usr/local/bin/platform-apiserver"]; ok {
		t.Error("the dispatcher's image holds /usr/local/bin/platform-apiserver")
	}
}

// TestBinaryName: --binary is one file name.
func TestBinaryName(t *testing.T) {
	for _, bad := range []string{"", "bin/platform", "../platform", ".hidden", "a b"} {
		in := testInputs("binary", "amd64")
		in.Binary = bad
		if _, err := Assemble(in); err == nil {
			t.Errorf("Assemble took binary name %q", bad)
		}
		r, _ := name.ParseReference("platform-apiserver:dev")
		if _, err := Write(t.TempDir(), bad, r, nil); err == nil {
			t.Errorf("Write took binary name %q", bad)
		}
	}
}

// TestDockerfileAgrees: the Dockerfile, for those who build with Docker,
// makes the same kind of images as hack/image: for each binary, a stage that
// compiles its package static and a target on the distroless nonroot base
// that runs it as hack/image does, as 65532:65532. Its last stage, the
// default target, is platform-apiserver's.
func TestDockerfileAgrees(t *testing.T) {
	b, err := os.ReadFile("../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	stages, order := dockerfileStages(string(b))
	for _, im := range repoImages {
		stage, ok := stages[im.target]
		if !ok {
			t.Errorf("Dockerfile has no target %s (stages %v)", im.target, order)
			continue
		}
		entrypoint := EntrypointFor(im.binary)
		for _, re := range []string{
			`^FROM gcr\.io/distroless/static-debian\d+:nonroot AS ` + regexp.QuoteMeta(im.target) + `\n`,
			`(?m)^USER 65532:65532$`,
			`(?m)^ENTRYPOINT \["` + regexp.QuoteMeta(entrypoint) + `"\]$`,
		} {
			if !regexp.MustCompile(re).MatchString(stage) {
				t.Errorf("Dockerfile's target %s lacks %s", im.target, re)
			}
		}
		m := regexp.MustCompile(`(?m)^COPY --from=(\S+) (\S+) ` + regexp.QuoteMeta(entrypoint) + `$`).FindStringSubmatch(stage)
		if m == nil {
			t.Errorf("Dockerfile's target %s does not copy a binary to %s", im.target, entrypoint)
			continue
		}
		build, ok := stages[m[1]]
		if !ok {
			t.Errorf("Dockerfile's target %s copies from %s, not a stage of it", im.target, m[1])
			continue
		}
		for _, re := range []string{
			`CGO_ENABLED=0`,
			`-trimpath`,
			`-o ` + regexp.QuoteMeta(m[2]) + ` ` + regexp.QuoteMeta(im.pkg) + `\n`,
		} {
			if !regexp.MustCompile(re).MatchString(build) {
				t.Errorf("Dockerfile's stage %s (building %s) lacks %s", m[1], im.target, re)
			}
		}
	}
	if len(order) == 0 || order[len(order)-1] != repoImages[0].target {
		t.Errorf("Dockerfile's last stage, the default target, is %v, want %s", order[len(order)-1:], repoImages[0].target)
	}
}

// dockerfileStages splits a Dockerfile at its FROM lines: each stage's text
// by its name, and the names in order.
func dockerfileStages(df string) (map[string]string, []string) {
	stages := map[string]string{}
	var order []string
	current := ""
	for line := range strings.Lines(df) {
		if f := strings.Fields(line); len(f) >= 4 && f[0] == "FROM" && strings.EqualFold(f[len(f)-2], "AS") {
			current = f[len(f)-1]
			order = append(order, current)
		}
		if current != "" {
			stages[current] += line
		}
	}
	return stages, order
}
