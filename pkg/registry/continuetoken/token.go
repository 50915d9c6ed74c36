// Package continuetoken encodes and validates the opaque continue tokens of
// paginated registry lists: a small versioned JSON payload signed with
// HMAC-SHA256 under a key all replicas share, so a token issued by one
// replica is honoured by another and a tampered one is refused.
package continuetoken

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/example/platform-apiserver/pkg/registry/store"
)

const (
	version = 1
	macSize = sha256.Size
)

// encoding is strict so that no two strings decode to the same bytes: any
// change to a token changes what the MAC covers.
var encoding = base64.RawURLEncoding.Strict()

// Token is what a continue token carries.
type Token struct {
	// Kind names the list the token continues, e.g. "nodecapacities".
	Kind string
	// Key is the sort key of the last item returned.
	Key []string
	// ResourceVersion is the first page's list resourceVersion.
	ResourceVersion int64
	// IssuedAt is when the first page was served.
	IssuedAt time.Time
}

type payload struct {
	V   int      `json:"v"`
	K   string   `json:"k"`
	Key []string `json:"key"`
	RV  int64    `json:"rv"`
	IAT int64    `json:"iat"` // unix milliseconds
}

// Options tunes a Codec.
type Options struct {
	// TTL is how long after IssuedAt a token is honoured; required.
	TTL time.Duration
	// Now is the clock; default time.Now.
	Now func() time.Time
}

// Codec signs and verifies tokens.
type Codec struct {
	key []byte
	ttl time.Duration
	now func() time.Time
}

// NewCodec returns a codec using key (at least 16 bytes) for the MAC.
func NewCodec(key []byte, opts Options) (*Codec, error) {
	if len(key) < 16 {
		return nil, fmt.Errorf("continue token key is %d bytes, want at least 16", len(key))
	}
	if opts.TTL <= 0 {
		return nil, errors.New("continue token TTL must be positive")
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Codec{key: bytes.Clone(key), ttl: opts.TTL, now: opts.Now}, nil
}

// Encode returns the opaque token string.
func (c *Codec) Encode(t Token) (string, error) {
	body, err := json.Marshal(payload{V: version, K: t.Kind, Key: t.Key, RV: t.ResourceVersion, IAT: t.IssuedAt.UnixMilli()})
	if err != nil {
		return "", fmt.Errorf("encode continue token: %w", err)
	}
	return encoding.EncodeToString(append(body, c.mac(body)...)), nil
}

// Decode verifies s and returns its token. It fails with
// store.ErrInvalidContinue for anything not issued by this registry for kind,
// and with store.ErrExpiredContinue for a valid token older than the TTL.
func (c *Codec) Decode(s, kind string) (Token, error) {
	raw, err := encoding.DecodeString(s)
	// Only the canonical encoding is a token: the decoder skips line breaks,
	// and a token with one inserted is not what the server issued.
	if err != nil || len(raw) <= macSize || encoding.EncodeToString(raw) != s {
		return Token{}, invalid("malformed")
	}
	body, sum := raw[:len(raw)-macSize], raw[len(raw)-macSize:]
	if !hmac.Equal(sum, c.mac(body)) {
		return Token{}, invalid("bad signature")
	}
	var p payload
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return Token{}, invalid("malformed payload")
	}
	if p.V != version {
		return Token{}, invalid(fmt.Sprintf("version %d", p.V))
	}
	if p.K != kind {
		return Token{}, invalid(fmt.Sprintf("issued for %q", p.K))
	}
	t := Token{Kind: p.K, Key: p.Key, ResourceVersion: p.RV, IssuedAt: time.UnixMilli(p.IAT)}
	if age := c.now().Sub(t.IssuedAt); age > c.ttl {
		return Token{}, fmt.Errorf("%w: issued %s ago, longer than %s; restart the list without continue", store.ErrExpiredContinue, age.Round(time.Second), c.ttl)
	}
	return t, nil
}

func (c *Codec) mac(body []byte) []byte {
	h := hmac.New(sha256.New, c.key)
	h.Write(body)
	return h.Sum(nil)
}

func invalid(why string) error {
	return fmt.Errorf("%w (%s): continue token is not valid for this list; restart the list without continue", store.ErrInvalidContinue, why)
}
