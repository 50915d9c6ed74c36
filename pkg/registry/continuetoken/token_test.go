package continuetoken

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/example/platform-apiserver/pkg/registry/store"
)

var testKey = []byte("0123456789abcdef0123456789abcdef")

func newCodec(t testing.TB, now time.Time, ttl time.Duration) *Codec {
	t.Helper()
	c, err := NewCodec(testKey, Options{TTL: ttl, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestRoundTrip(t *testing.T) {
	t.Parallel()
	now := time.UnixMilli(1_700_000_000_000)
	c := newCodec(t, now, time.Minute)
	in := Token{Kind: "nodecapacities", Key: []string{"prod-1", "node-a"}, ResourceVersion: 42, IssuedAt: now.Add(-time.Second)}
	s, err := c.Encode(in)
	if err != nil {
		t.Fatal(err)
	}
	out, err := c.Decode(s, "nodecapacities")
	if err != nil {
		t.Fatal(err)
	}
	if out.Kind != in.Kind || out.ResourceVersion != in.ResourceVersion || !out.IssuedAt.Equal(in.IssuedAt) || strings.Join(out.Key, "/") != "prod-1/node-a" {
		t.Fatalf("round trip: got %+v, want %+v", out, in)
	}
}

func TestDecodeErrors(t *testing.T) {
	t.Parallel()
	now := time.UnixMilli(1_700_000_000_000)
	c := newCodec(t, now, time.Minute)
	valid, err := c.Encode(Token{Kind: "nodecapacities", Key: []string{"a", "b"}, ResourceVersion: 1, IssuedAt: now})
	if err != nil {
		t.Fatal(err)
	}
	old, err := c.Encode(Token{Kind: "nodecapacities", Key: []string{"a", "b"}, ResourceVersion: 1, IssuedAt: now.Add(-2 * time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	other, err := NewCodec([]byte("another key, also long enough"), Options{TTL: time.Minute, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	foreign, err := other.Encode(Token{Kind: "nodecapacities", Key: []string{"a", "b"}, IssuedAt: now})
	if err != nil {
		t.Fatal(err)
	}
	// A flipped bit in the payload is tampering; in the key id, the token
	// names a key this registry does not have.
	flipped := []byte(valid)
	flipped[20] ^= 1
	flippedKeyID := []byte(valid)
	flippedKeyID[3] ^= 1
	recreated, err := NewCodec([]byte("a re-created registry's new random key"), Options{TTL: time.Minute, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	afterRecreate, err := recreated.Encode(Token{Kind: "nodecapacities", Key: []string{"a", "b"}, IssuedAt: now})
	if err != nil {
		t.Fatal(err)
	}
	// Version 1, before key ids: payload and MAC under this very key.
	v1Body := []byte(`{"v":1,"k":"nodecapacities","key":["a","b"],"rv":1,"iat":` + strconv.FormatInt(now.UnixMilli(), 10) + `}`)
	v1 := encoding.EncodeToString(append(v1Body, c.mac(v1Body)...))
	tests := []struct {
		name  string
		token string
		kind  string
		want  error
	}{
		{name: "empty", token: "", kind: "nodecapacities", want: store.ErrInvalidContinue},
		{name: "not base64", token: "!!!", kind: "nodecapacities", want: store.ErrInvalidContinue},
		{name: "truncated", token: valid[:len(valid)-2], kind: "nodecapacities", want: store.ErrInvalidContinue},
		{name: "flipped bit", token: string(flipped), kind: "nodecapacities", want: store.ErrInvalidContinue},
		{name: "flipped bit in the key id", token: string(flippedKeyID), kind: "nodecapacities", want: store.ErrExpiredContinue},
		{name: "other registry's key", token: foreign, kind: "nodecapacities", want: store.ErrExpiredContinue},
		{name: "registry re-created", token: afterRecreate, kind: "nodecapacities", want: store.ErrExpiredContinue},
		{name: "version 1 token (no key id)", token: v1, kind: "nodecapacities", want: store.ErrExpiredContinue},
		{name: "key id only", token: valid[:11], kind: "nodecapacities", want: store.ErrInvalidContinue},
		{name: "other kind", token: valid, kind: "clusternamespaces", want: store.ErrInvalidContinue},
		{name: "expired", token: old, kind: "nodecapacities", want: store.ErrExpiredContinue},
		{name: "valid", token: valid, kind: "nodecapacities", want: nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.Decode(tc.token, tc.kind)
			if !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
				t.Fatalf("Decode: got %v, want %v", err, tc.want)
			}
			if errors.Is(err, store.ErrInvalidContinue) && !strings.Contains(err.Error(), "restart the list without continue") {
				t.Errorf("message does not help: %v", err)
			}
			if tc.name == "registry re-created" && !strings.Contains(err.Error(), "another registry or by this one before its database was re-created") {
				t.Errorf("message does not help: %v", err)
			}
		})
	}
}

func TestNewCodecRejectsShortKey(t *testing.T) {
	t.Parallel()
	if _, err := NewCodec([]byte("short"), Options{TTL: time.Minute}); err == nil {
		t.Fatal("want error for a short key")
	}
}

// FuzzDecode checks that Decode never panics on arbitrary input and never
// accepts a token that differs from the one issued.
func FuzzDecode(f *testing.F) {
	now := time.UnixMilli(1_700_000_000_000)
	c := newCodec(f, now, time.Hour)
	valid, err := c.Encode(Token{Kind: "nodecapacities", Key: []string{"prod-1", "node-a"}, ResourceVersion: 7, IssuedAt: now})
	if err != nil {
		f.Fatal(err)
	}
	f.Add("", 0, byte(0))
	f.Add(valid, 5, byte(1))
	f.Add(valid, len(valid)-1, byte(2))
	f.Fuzz(func(t *testing.T, arbitrary string, pos int, delta byte) {
		_, _ = c.Decode(arbitrary, "nodecapacities")

		mutated := []byte(valid)
		if pos < 0 {
			pos = -pos
		}
		if pos < 0 || len(mutated) == 0 {
			return
		}
		mutated[pos%len(mutated)] += delta
		m := string(mutated)
		if arbitrary != "" && arbitrary != valid {
			m = arbitrary // also require that no other string is accepted
		}
		if m == valid {
			return
		}
		if tok, err := c.Decode(m, "nodecapacities"); err == nil {
			t.Fatalf("accepted mutated token %q: %+v", m, tok)
		}
	})
}
