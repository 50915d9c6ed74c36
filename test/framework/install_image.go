package framework

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// Image is a container image archive unpacked to a directory: its root
// filesystem and the config it runs with.
type Image struct {
	RootFS string
	Config v1.Config
}

// UnpackImage reads a Docker/OCI archive (what `make image` writes) as
// `docker load` would, from its manifest.json, and unpacks its flattened
// filesystem into dir with the modes and owners of the layers.
func UnpackImage(archive, ref, dir string) (*Image, error) {
	var tag *name.Tag
	if ref != "" {
		t, err := name.NewTag(ref)
		if err != nil {
			return nil, err
		}
		tag = &t
	}
	img, err := tarball.ImageFromPath(archive, tag)
	if err != nil {
		return nil, fmt.Errorf("read image archive %s: %w", archive, err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("unpack %s: %w", archive, err)
		}
		clean := filepath.Clean("/" + hdr.Name)
		if clean == "/" {
			continue
		}
		p := filepath.Join(dir, clean)
		mode := os.FileMode(hdr.Mode).Perm()
		switch hdr.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(p, 0o755); err != nil {
				return nil, err
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				return nil, err
			}
			f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
			if err != nil {
				return nil, err
			}
			if _, err := io.Copy(f, tr); err != nil {
				f.Close()
				return nil, err
			}
			if err := f.Close(); err != nil {
				return nil, err
			}
		case tar.TypeSymlink:
			if err := os.Symlink(hdr.Linkname, p); err != nil {
				return nil, err
			}
		default:
			return nil, fmt.Errorf("unpack %s: %s has unsupported type %c", archive, hdr.Name, hdr.Typeflag)
		}
		// Modes with sticky/setuid bits and owners as the layer says (root
		// unpacks; Chown fails harmlessly for others, who cannot run images).
		if err := os.Chmod(p, tarMode(hdr)); err != nil {
			return nil, err
		}
		_ = os.Lchown(p, hdr.Uid, hdr.Gid)
	}
	return &Image{RootFS: dir, Config: cf.Config}, nil
}

func tarMode(hdr *tar.Header) os.FileMode {
	m := os.FileMode(hdr.Mode).Perm()
	if hdr.Mode&0o1000 != 0 {
		m |= os.ModeSticky
	}
	if hdr.Mode&0o2000 != 0 {
		m |= os.ModeSetgid
	}
	if hdr.Mode&0o4000 != 0 {
		m |= os.ModeSetuid
	}
	return m
}

// Entrypoint returns the image's binary as a path on the host.
func (img *Image) Entrypoint() string {
	if len(img.Config.Entrypoint) == 0 {
		return ""
	}
	return filepath.Join(img.RootFS, strings.TrimPrefix(img.Config.Entrypoint[0], "/"))
}
