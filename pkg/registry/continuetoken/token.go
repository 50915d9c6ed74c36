// Package continuetoken encodes and validates the opaque continue tokens of
// paginated registry lists: a small versioned JSON payload signed with
// HMAC-SHA256 under a key all replicas share, so a token issued by one
// replica is honoured by another and a tampered one is refused. Each token
// starts with the id of the key that signed it: one signed under another
// key (another registry, or this one's database re-created or restored
// from before its key) has expired rather than been tampered with, so it
// gets 410 and clients restart their list.
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
	// version 2 put the key id in front; a version 1 token has no key id,
	// and its first bytes match none.
	version = 2
	macSize = sha256.Size
	kidSize = 8
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
	kid []byte
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
	return &Codec{key: bytes.Clone(key), kid: keyID(key), ttl: opts.TTL, now: opts.Now}, nil
}

// keyID names key without revealing it: the first bytes of a hash of it
// under a label of its own (never the MAC of anything a token carries).
func keyID(key []byte) []byte {
	h := sha256.New()
	h.Write([]byte("platform-apiserver continue token key id\x00"))
	h.Write(key)
	return h.Sum(nil)[:kidSize]
}

// Now is the codec's clock: a token issued now takes it as IssuedAt.
func (c *Codec) Now() time.Time { return c.now() }

// Encode returns the opaque token string.
func (c *Codec) Encode(t Token) (string, error) {
	body, err := json.Marshal(payload{V: version, K: t.Kind, Key: t.Key, RV: t.ResourceVersion, IAT: t.IssuedAt.UnixMilli()})
	if err != nil {
		return "", fmt.Errorf("encode continue token: %w", err)
	}
	signed := append(bytes.Clone(c.kid), body...)
	return encoding.EncodeToString(append(signed, c.mac(signed)...)), nil
}

// Decode verifies s and returns its token. It fails with
// store.ErrExpiredContinue for a token signed under another key (another
// registry's, or this one's before its database was re-created) and for a
// valid token older than the TTL, and with store.ErrInvalidContinue for
// anything else not issued by this registry for kind.
func (c *Codec) Decode(s, kind string) (Token, error) {
	raw, err := encoding.DecodeString(s)
	// Only the canonical encoding is a token: the decoder skips line breaks,
	// and a token with one inserted is not what the server issued.
	if err != nil || len(raw) <= kidSize+macSize || encoding.EncodeToString(raw) != s {
		return Token{}, invalid("malformed")
	}
	signed, sum := raw[:len(raw)-macSize], raw[len(raw)-macSize:]
	if !bytes.Equal(signed[:kidSize], c.kid) {
		// The server answers 410 with "restart the list without continue".
		return Token{}, fmt.Errorf("%w: it was signed under another key, by another registry or by this one before its database was re-created",
			store.ErrExpiredContinue)
	}
	if !hmac.Equal(sum, c.mac(signed)) {
		return Token{}, invalid("bad signature")
	}
	body := signed[kidSize:]
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
