package meter

import (
	"bytes"
	"context"
	"net/http"
	"time"
)

// clientWriter writes to the agent, flushing each piece, with a deadline
// on every write (an agent that stops reading does not hold the upstream
// open) and nothing written once the request's context ended.
type clientWriter struct {
	ctx     context.Context
	w       http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
}

func (c *clientWriter) write(b []byte) error {
	if err := c.ctx.Err(); err != nil {
		return err
	}
	_ = c.rc.SetWriteDeadline(time.Now().Add(c.timeout)) // the server's writers support it
	if _, err := c.w.Write(b); err != nil {
		return err
	}
	return c.rc.Flush()
}

// framer writes what the client sees of a stream.
type framer interface {
	// event forwards one upstream event: its raw bytes, or its data.
	event(raw, data []byte) error
	// tail forwards bytes after the last event (blank lines, a piece of
	// an event the stream broke in).
	tail(raw []byte) error
	// sse writes an event the proxy makes (name "" for none).
	sse(name string, data []byte) error
	// object writes a JSON object on its own.
	object(obj []byte) error
	// end finishes a stream that ended well.
	end() error
}

// sseFramer passes the upstream's server-sent events through as they came.
type sseFramer struct{ cw *clientWriter }

func (f sseFramer) event(raw, _ []byte) error { return f.cw.write(raw) }
func (f sseFramer) tail(raw []byte) error     { return f.cw.write(raw) }
func (f sseFramer) object(obj []byte) error   { return f.cw.write(obj) }
func (f sseFramer) end() error                { return nil }

func (f sseFramer) sse(name string, data []byte) error {
	var b bytes.Buffer
	if name != "" {
		b.WriteString("event: " + name + "\n")
	}
	b.WriteString("data: ")
	b.Write(data)
	b.WriteString("\n\n")
	return f.cw.write(b.Bytes())
}

// arrayFramer turns events back into the JSON array a Gemini stream is
// without alt=sse: "[" elem ",\r\n" elem ... "]".
type arrayFramer struct {
	cw *clientWriter
	n  int
}

func (f *arrayFramer) event(_, data []byte) error {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil
	}
	sep := ",\r\n"
	if f.n == 0 {
		sep = "["
	}
	f.n++
	return f.cw.write(append([]byte(sep), data...))
}

func (f *arrayFramer) tail([]byte) error { return nil }

func (f *arrayFramer) sse(_ string, data []byte) error { return f.object(data) }

func (f *arrayFramer) object(obj []byte) error {
	if err := f.event(nil, obj); err != nil {
		return err
	}
	return f.end()
}

func (f *arrayFramer) end() error {
	if f.n == 0 {
		return f.cw.write([]byte("[]"))
	}
	return f.cw.write([]byte("]"))
}
