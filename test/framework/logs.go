package framework

import (
	"bytes"
	"io"
	"os"
	"strings"
	"sync"
)

// logTail returns up to n last lines of the file at path, or a note why it can't.
func logTail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// syncWriter serialises writes from several processes to one writer.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

// prefixWriter writes whole lines to w, each prefixed with prefix. A trailing
// partial line is held until its newline arrives.
type prefixWriter struct {
	prefix []byte
	w      io.Writer
	mu     sync.Mutex
	buf    []byte
}

func newPrefixWriter(name string, w io.Writer) *prefixWriter {
	return &prefixWriter{prefix: []byte("[" + name + "] "), w: w}
}

func (p *prefixWriter) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.buf = append(p.buf, b...)
	var out []byte
	for {
		i := bytes.IndexByte(p.buf, '\n')
		if i < 0 {
			break
		}
		out = append(out, p.prefix...)
		out = append(out, p.buf[:i+1]...)
		p.buf = p.buf[i+1:]
	}
	if len(out) > 0 {
		if _, err := p.w.Write(out); err != nil {
			return 0, err
		}
	}
	return len(b), nil
}
