package main

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// PushOptions say what Push pushes where.
type PushOptions struct {
	From     string // Build's output directory
	Image    string // registry reference
	Insecure bool
}

// Push pushes the image that Build wrote under o.From (its oci/ layout) to
// o.Image with the local registry credentials, and returns the pushed
// reference with its digest.
func Push(ctx context.Context, o PushOptions) (string, error) {
	if o.Image == "" {
		return "", fmt.Errorf("--image is required: the registry reference to push to (e.g. IMAGE=registry.example.com/platform/platform-apiserver:v0.1.0)")
	}
	var opts []name.Option
	if o.Insecure {
		opts = append(opts, name.Insecure)
	}
	ref, err := name.ParseReference(o.Image, opts...)
	if err != nil {
		return "", fmt.Errorf("--image %q: %w", o.Image, err)
	}
	p, err := layout.FromPath(filepath.Join(o.From, "oci"))
	if err != nil {
		return "", fmt.Errorf("read the image built into %s (run make image first): %w", o.From, err)
	}
	root, err := p.ImageIndex()
	if err != nil {
		return "", err
	}
	m, err := root.IndexManifest()
	if err != nil {
		return "", err
	}
	if len(m.Manifests) != 1 {
		return "", fmt.Errorf("%s holds %d entries, want the one image or index that build writes", o.From, len(m.Manifests))
	}
	desc := m.Manifests[0]
	remoteOpts := []remote.Option{remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain)}
	if desc.MediaType.IsIndex() {
		idx, err := root.ImageIndex(desc.Digest)
		if err != nil {
			return "", err
		}
		if err := remote.WriteIndex(ref, idx, remoteOpts...); err != nil {
			return "", fmt.Errorf("push %s: %w", ref, err)
		}
	} else {
		img, err := root.Image(desc.Digest)
		if err != nil {
			return "", err
		}
		if err := remote.Write(ref, img, remoteOpts...); err != nil {
			return "", fmt.Errorf("push %s: %w", ref, err)
		}
	}
	return ref.Context().Digest(desc.Digest.String()).String(), nil
}
