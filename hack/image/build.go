package main

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// What the image holds and how it runs, shared with the Dockerfile (a test
// checks that they agree).
const (
	DefaultBinary = "platform-apiserver"
	NonrootUID    = 65532
	binDir        = "/usr/local/bin"
	caBundle      = "/etc/ssl/certs/ca-certificates.crt"
	source        = "https://github.com/example/platform-apiserver"
)

// EntrypointFor is where the image holds the binary named binary, and what
// its config runs: /usr/local/bin/<binary>.
func EntrypointFor(binary string) string { return path.Join(binDir, binary) }

// ArchiveFor is the file name of the archive Build and Write store an
// image of the binary named binary in: <binary>.tar.
func ArchiveFor(binary string) string { return binary + ".tar" }

// descriptions are the org.opencontainers.image.description labels of the
// binaries this repository builds; another binary's image has none.
var descriptions = map[string]string{
	"platform-apiserver":        "Kubernetes aggregated API server for platform.example.io (NodeCapacity, ClusterNamespace)",
	"platform-kueue-dispatcher": "External dispatcher for Kueue's MultiKueue that nominates the worker cluster where a PlacementReport says a Workload fits",
}

var binaryName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)

// checkBinary rejects a binary name that is not one plain file name.
func checkBinary(binary string) error {
	if !binaryName.MatchString(binary) {
		return fmt.Errorf("binary name %q: want a file name such as %s (letters, digits, '.', '_', '-')", binary, DefaultBinary)
	}
	return nil
}

// BuildOptions say what Build builds.
type BuildOptions struct {
	Image     string   // reference the archive tags the image with
	Platforms []string // os/arch, e.g. linux/amd64
	Output    string   // directory for oci/, the archive (ArchiveFor(Binary)) and digest
	Package   string   // Go package of the binary (./cmd/apiserver)
	// Binary names the binary: the image runs EntrypointFor(Binary) and is
	// archived as ArchiveFor(Binary). Empty means DefaultBinary.
	Binary string
	// Binaries, when set, maps each platform to a prebuilt binary file
	// instead of building Package (tests use it).
	Binaries        map[string]string
	CACertificates  string
	Version         string
	Revision        string
	SourceDateEpoch int64 // < 0: $SOURCE_DATE_EPOCH, else HEAD's commit time, else 0
}

// BuildResult names what Build wrote.
type BuildResult struct {
	Digest    v1.Hash // of the image index (several platforms) or manifest (one)
	LayoutDir string
	Archive   string
}

// Build compiles the binary for each platform, assembles the image and
// writes it under o.Output.
func Build(ctx context.Context, o BuildOptions) (BuildResult, error) {
	if len(o.Platforms) == 0 {
		return BuildResult{}, fmt.Errorf("no platform given")
	}
	ref, err := name.ParseReference(o.Image)
	if err != nil {
		return BuildResult{}, fmt.Errorf("--image %q: %w", o.Image, err)
	}
	if o.Binary == "" {
		o.Binary = DefaultBinary
	}
	if err := checkBinary(o.Binary); err != nil {
		return BuildResult{}, fmt.Errorf("--binary: %w", err)
	}
	if o.SourceDateEpoch < 0 {
		o.SourceDateEpoch = sourceDateEpoch(ctx)
	}
	if o.Version == "" {
		o.Version = gitOutput(ctx, "describe", "--tags", "--always", "--dirty")
	}
	if o.Revision == "" {
		o.Revision = gitOutput(ctx, "rev-parse", "HEAD")
	}
	certs, err := os.ReadFile(o.CACertificates)
	if err != nil {
		return BuildResult{}, fmt.Errorf("CA certificates (install Debian's ca-certificates or pass --ca-certificates): %w", err)
	}
	buildDir := filepath.Join(o.Output, "bin")
	var images []PlatformImage
	for _, p := range o.Platforms {
		plat, err := v1.ParsePlatform(p)
		if err != nil || plat.OS == "" || plat.Architecture == "" {
			return BuildResult{}, fmt.Errorf("platform %q: want os/arch such as linux/amd64", p)
		}
		bin := o.Binaries[p]
		if bin == "" {
			bin = filepath.Join(buildDir, plat.OS+"-"+plat.Architecture, o.Binary)
			if err := buildBinary(ctx, o.Package, *plat, bin); err != nil {
				return BuildResult{}, err
			}
		}
		executable, err := os.ReadFile(bin)
		if err != nil {
			return BuildResult{}, err
		}
		img, err := Assemble(ImageInputs{
			Platform: *plat, Binary: o.Binary, Executable: executable, CACertificates: certs,
			Created: time.Unix(o.SourceDateEpoch, 0).UTC(), Version: o.Version, Revision: o.Revision,
		})
		if err != nil {
			return BuildResult{}, fmt.Errorf("assemble the %s image: %w", p, err)
		}
		images = append(images, PlatformImage{Platform: *plat, Image: img})
	}
	return Write(o.Output, o.Binary, ref, images)
}

// buildBinary compiles pkg for plat: static (no cgo), trimmed paths, no VCS
// stamp and no symbol table, so the bytes depend only on source and toolchain.
func buildBinary(ctx context.Context, pkg string, plat v1.Platform, out string) error {
	start := time.Now()
	fmt.Fprintf(os.Stderr, ">> go build %s for %s/%s\n", pkg, plat.OS, plat.Architecture)
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-buildvcs=false", "-ldflags=-s -w", "-o", out, pkg)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+plat.OS, "GOARCH="+plat.Architecture)
	if plat.Variant != "" && plat.Architecture == "arm" {
		cmd.Env = append(cmd.Env, "GOARM="+strings.TrimPrefix(plat.Variant, "v"))
	}
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build %s for %s/%s: %w", pkg, plat.OS, plat.Architecture, err)
	}
	fmt.Fprintf(os.Stderr, ">> built %s in %s\n", out, time.Since(start).Round(time.Second))
	return nil
}

// ImageInputs are everything an image is made of: the same inputs give the
// same digest.
type ImageInputs struct {
	Platform v1.Platform
	// Binary names the binary: the image holds Executable as, and runs,
	// EntrypointFor(Binary); the title label and the layer's history name it.
	Binary            string
	Executable        []byte
	CACertificates    []byte
	Created           time.Time
	Version, Revision string
}

// PlatformImage is one platform's image.
type PlatformImage struct {
	Platform v1.Platform
	Image    v1.Image
}

type tarEntry struct {
	name     string
	mode     int64
	uid, gid int
	dir      bool
	body     []byte
}

// Assemble makes the image: a base layer (CA certificates, passwd/group with
// the nonroot user, /tmp, nonroot's home) and the binary's layer, with a
// config that runs the binary as 65532:65532.
func Assemble(in ImageInputs) (v1.Image, error) {
	if err := checkBinary(in.Binary); err != nil {
		return nil, err
	}
	entrypoint := EntrypointFor(in.Binary)
	passwd := "root:x:0:0:root:/root:/sbin/nologin\n" +
		"nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n" +
		"nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"
	group := "root:x:0:\nnobody:x:65534:\nnonroot:x:65532:\n"
	base, err := layer(in.Created, []tarEntry{
		{name: "etc/", mode: 0o755, dir: true},
		{name: "etc/group", mode: 0o644, body: []byte(group)},
		{name: "etc/nsswitch.conf", mode: 0o644, body: []byte("hosts: files dns\n")},
		{name: "etc/passwd", mode: 0o644, body: []byte(passwd)},
		{name: "etc/ssl/", mode: 0o755, dir: true},
		{name: "etc/ssl/certs/", mode: 0o755, dir: true},
		{name: "etc/ssl/certs/ca-certificates.crt", mode: 0o644, body: in.CACertificates},
		{name: "home/", mode: 0o755, dir: true},
		{name: "home/nonroot/", mode: 0o700, uid: NonrootUID, gid: NonrootUID, dir: true},
		{name: "tmp/", mode: 0o1777, dir: true},
		{name: "usr/", mode: 0o755, dir: true},
		{name: "usr/local/", mode: 0o755, dir: true},
		{name: "usr/local/bin/", mode: 0o755, dir: true},
	})
	if err != nil {
		return nil, err
	}
	app, err := layer(in.Created, []tarEntry{
		{name: strings.TrimPrefix(entrypoint, "/"), mode: 0o755, body: in.Executable},
	})
	if err != nil {
		return nil, err
	}
	created := v1.Time{Time: in.Created}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.Append(img,
		mutate.Addendum{Layer: base, History: v1.History{Created: created, CreatedBy: "hack/image: CA certificates, nonroot user (65532), /tmp", Comment: "base"}},
		mutate.Addendum{Layer: app, History: v1.History{Created: created, CreatedBy: "hack/image: " + entrypoint + " (CGO_ENABLED=0 go build -trimpath)", Comment: in.Binary}},
	)
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.Created = created
	cf.OS, cf.Architecture, cf.Variant = in.Platform.OS, in.Platform.Architecture, in.Platform.Variant
	cf.Config = v1.Config{
		User:       strconv.Itoa(NonrootUID) + ":" + strconv.Itoa(NonrootUID),
		Entrypoint: []string{entrypoint},
		WorkingDir: "/home/nonroot",
		Env: []string{
			"PATH=/usr/local/bin:/usr/bin:/bin",
			"SSL_CERT_FILE=" + caBundle,
		},
		Labels: map[string]string{
			"org.opencontainers.image.title":    in.Binary,
			"org.opencontainers.image.source":   source,
			"org.opencontainers.image.version":  in.Version,
			"org.opencontainers.image.revision": in.Revision,
			"org.opencontainers.image.created":  in.Created.UTC().Format(time.RFC3339),
		},
	}
	if d, ok := descriptions[in.Binary]; ok {
		cf.Config.Labels["org.opencontainers.image.description"] = d
	}
	return mutate.ConfigFile(img, cf)
}

// layer makes a gzip-compressed layer of entries with normalized headers:
// fixed time, numeric owners only, sorted by name.
func layer(created time.Time, entries []tarEntry) (v1.Layer, error) {
	sort.Slice(entries, func(i, j int) bool { return entries[i].name < entries[j].name })
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		hdr := &tar.Header{
			Name: e.name, Mode: e.mode, Uid: e.uid, Gid: e.gid,
			ModTime: created, Format: tar.FormatPAX, Typeflag: tar.TypeReg, Size: int64(len(e.body)),
		}
		if e.dir {
			hdr.Typeflag, hdr.Size = tar.TypeDir, 0
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, err
		}
		if _, err := tw.Write(e.body); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	data := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(data)), nil
	}, tarball.WithMediaType(types.OCILayer))
}

// Write stores images of the binary named binary under dir as an OCI layout
// (oci/) and as one archive that is both that layout and a Docker archive
// (ArchiveFor(binary), e.g. platform-apiserver.tar), tagged ref. One platform
// is stored as its manifest, several as an index.
func Write(dir, binary string, ref name.Reference, images []PlatformImage) (BuildResult, error) {
	if err := checkBinary(binary); err != nil {
		return BuildResult{}, err
	}
	if len(images) == 0 {
		return BuildResult{}, fmt.Errorf("no image to write")
	}
	layoutDir := filepath.Join(dir, "oci")
	if err := os.RemoveAll(layoutDir); err != nil {
		return BuildResult{}, err
	}
	p, err := layout.Write(layoutDir, empty.Index)
	if err != nil {
		return BuildResult{}, err
	}
	tag := "latest"
	if t, ok := ref.(name.Tag); ok {
		tag = t.TagStr()
	}
	annotations := map[string]string{
		// What `docker save` writes: containerd (ctr import, docker) reads the
		// full name, podman and skopeo the ref.name.
		"io.containerd.image.name":          containerdName(ref),
		"org.opencontainers.image.ref.name": tag,
	}
	var digest v1.Hash
	if len(images) == 1 {
		if err := p.AppendImage(images[0].Image, layout.WithAnnotations(annotations)); err != nil {
			return BuildResult{}, err
		}
		if digest, err = images[0].Image.Digest(); err != nil {
			return BuildResult{}, err
		}
	} else {
		idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
		for _, pi := range images {
			plat := pi.Platform
			idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: pi.Image, Descriptor: v1.Descriptor{Platform: &plat}})
		}
		if err := p.AppendIndex(idx, layout.WithAnnotations(annotations)); err != nil {
			return BuildResult{}, err
		}
		if digest, err = idx.Digest(); err != nil {
			return BuildResult{}, err
		}
	}
	// Docker's manifest.json for the first platform, pointing into blobs/.
	first := images[0].Image
	cfgName, err := first.ConfigName()
	if err != nil {
		return BuildResult{}, err
	}
	layers, err := first.Layers()
	if err != nil {
		return BuildResult{}, err
	}
	blob := func(h v1.Hash) string { return path.Join("blobs", h.Algorithm, h.Hex) }
	entry := struct {
		Config   string
		RepoTags []string
		Layers   []string
	}{Config: blob(cfgName), RepoTags: []string{dockerTag(ref)}}
	for _, l := range layers {
		d, err := l.Digest()
		if err != nil {
			return BuildResult{}, err
		}
		entry.Layers = append(entry.Layers, blob(d))
	}
	manifestJSON, err := json.Marshal([]any{entry})
	if err != nil {
		return BuildResult{}, err
	}
	archive := filepath.Join(dir, ArchiveFor(binary))
	if err := writeArchive(archive, layoutDir, map[string][]byte{"manifest.json": manifestJSON}); err != nil {
		return BuildResult{}, err
	}
	if err := os.WriteFile(filepath.Join(dir, "digest"), []byte(digest.String()+"\n"), 0o644); err != nil {
		return BuildResult{}, err
	}
	return BuildResult{Digest: digest, LayoutDir: layoutDir, Archive: archive}, nil
}

// writeArchive tars the layout directory and extra files, sorted, with
// normalized headers, so the same layout gives the same bytes.
func writeArchive(out, layoutDir string, extra map[string][]byte) error {
	files := map[string][]byte{}
	var dirs []string
	err := filepath.WalkDir(layoutDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(layoutDir, p)
		if err != nil || rel == "." {
			return err
		}
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			dirs = append(dirs, rel+"/")
			return nil
		}
		b, err := os.ReadFile(p)
		files[rel] = b
		return err
	})
	if err != nil {
		return err
	}
	maps.Copy(files, extra)
	names := append([]string(nil), dirs...)
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	tmp := out + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	defer os.Remove(tmp)
	tw := tar.NewWriter(f)
	for _, n := range names {
		hdr := &tar.Header{Name: n, Mode: 0o644, ModTime: time.Unix(0, 0), Format: tar.FormatPAX, Typeflag: tar.TypeReg}
		if strings.HasSuffix(n, "/") {
			hdr.Mode, hdr.Typeflag = 0o755, tar.TypeDir
		} else {
			hdr.Size = int64(len(files[n]))
		}
		if err := tw.WriteHeader(hdr); err != nil {
			f.Close()
			return err
		}
		if _, err := tw.Write(files[n]); err != nil {
			f.Close()
			return err
		}
	}
	if err := tw.Close(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, out)
}

// containerdName is the fully qualified name containerd records
// (docker.io/library/platform-apiserver:dev).
func containerdName(ref name.Reference) string {
	reg := ref.Context().RegistryStr()
	if reg == name.DefaultRegistry {
		reg = "docker.io"
	}
	return reg + "/" + ref.Context().RepositoryStr() + tagOrDigest(ref)
}

// dockerTag is the name docker load tags the image with: short for Docker
// Hub (platform-apiserver:dev), full otherwise.
func dockerTag(ref name.Reference) string {
	full := containerdName(ref)
	full = strings.TrimPrefix(full, "docker.io/")
	return strings.TrimPrefix(full, "library/")
}

func tagOrDigest(ref name.Reference) string {
	if t, ok := ref.(name.Tag); ok {
		return ":" + t.TagStr()
	}
	return "@" + ref.Identifier()
}

// sourceDateEpoch is $SOURCE_DATE_EPOCH, else HEAD's commit time, else 0.
func sourceDateEpoch(ctx context.Context) int64 {
	if s := os.Getenv("SOURCE_DATE_EPOCH"); s != "" {
		if v, err := strconv.ParseInt(s, 10, 64); err == nil {
			return v
		}
	}
	if v, err := strconv.ParseInt(gitOutput(ctx, "log", "-1", "--format=%ct"), 10, 64); err == nil {
		return v
	}
	return 0
}

func gitOutput(ctx context.Context, args ...string) string {
	out, err := exec.CommandContext(ctx, "git", args...).Output()
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(out))
}

// fileDigest is the sha256 of a file, for logs and tests.
func fileDigest(p string) (string, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
}
