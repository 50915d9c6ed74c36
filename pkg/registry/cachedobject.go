package registry

import (
	"bytes"
	"io"
	"sync"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// cachedObject wraps an API object that many watches send, so each
// encoding of it is done once: the apiserver's watch encoder asks a
// runtime.CacheableObject for the serialization of a whole event per
// encoder identity (media type, version, event type), and every watcher
// asking for the same identity gets the same bytes. The object must not be
// modified once wrapped.
type cachedObject struct {
	obj runtime.Object

	mu      sync.Mutex
	encoded map[runtime.Identifier]*encoding
}

type encoding struct {
	once sync.Once
	data []byte
	err  error
}

var _ runtime.CacheableObject = &cachedObject{}

func newCachedObject(obj runtime.Object) *cachedObject {
	return &cachedObject{obj: obj, encoded: map[runtime.Identifier]*encoding{}}
}

// unwrap returns the object a cachedObject wraps, or obj itself.
func unwrap(obj runtime.Object) runtime.Object {
	if c, ok := obj.(*cachedObject); ok {
		return c.obj
	}
	return obj
}

// CacheEncode writes the serialization for id, encoding the object the
// first time. Encoders may touch the object they encode (e.g. its kind), so
// each encoding works on a copy, as kube-apiserver's cacher does.
func (c *cachedObject) CacheEncode(id runtime.Identifier, encode func(runtime.Object, io.Writer) error, w io.Writer) error {
	c.mu.Lock()
	e := c.encoded[id]
	if e == nil {
		e = &encoding{}
		c.encoded[id] = e
	}
	c.mu.Unlock()
	e.once.Do(func() {
		encodings.Inc()
		var buf bytes.Buffer
		e.err = encode(c.obj.DeepCopyObject(), &buf)
		e.data = buf.Bytes()
	})
	if e.err != nil {
		return e.err
	}
	_, err := w.Write(e.data)
	return err
}

// GetObject returns a copy of the wrapped object (callers may modify it).
func (c *cachedObject) GetObject() runtime.Object { return c.obj.DeepCopyObject() }

func (c *cachedObject) GetObjectKind() schema.ObjectKind { return c.obj.GetObjectKind() }

func (c *cachedObject) DeepCopyObject() runtime.Object {
	return newCachedObject(c.obj.DeepCopyObject())
}
