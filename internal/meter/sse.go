package meter

import (
	"bufio"
	"bytes"
	"errors"
	"io"
)

// sseEvent is one server-sent event's fields the proxy reads.
type sseEvent struct {
	name string // the event: field ("" if none)
	data []byte // the data: lines joined by "\n"
}

// errEventTooLarge is an event larger than the proxy reads.
var errEventTooLarge = errors.New("a server-sent event is larger than the proxy reads")

// sseReader splits a text/event-stream into events and keeps each event's
// raw bytes, so that what the client sees is what the upstream sent. Lines
// end in \n or \r\n (a lone \r is not taken for a line end; no provider
// sends one).
type sseReader struct {
	br  *bufio.Reader
	max int
	err error
}

func newSSEReader(r io.Reader, max int) *sseReader {
	return &sseReader{br: bufio.NewReaderSize(r, 64<<10), max: max}
}

// next returns the next event: its raw bytes (from the end of the previous
// event through the blank line that ends this one) and its fields. Blank
// lines before an event belong to its raw bytes. At the end of the stream
// a last event without its blank line is returned as it is (its usage still
// counts), then io.EOF; a stream that breaks returns the error. Raw bytes
// are returned with the error too, so that nothing read is lost.
func (s *sseReader) next() (raw []byte, ev sseEvent, err error) {
	if s.err != nil {
		return nil, sseEvent{}, s.err
	}
	var data [][]byte
	fields := false
	for {
		line, err := s.readLine(len(raw))
		raw = append(raw, line...)
		if err != nil {
			s.err = err
			if err == io.EOF && fields {
				ev.data = bytes.Join(data, []byte("\n"))
				return raw, ev, nil
			}
			return raw, sseEvent{}, err
		}
		text := bytes.TrimSuffix(bytes.TrimSuffix(line, []byte("\n")), []byte("\r"))
		if len(text) == 0 {
			if fields {
				ev.data = bytes.Join(data, []byte("\n"))
				return raw, ev, nil
			}
			continue
		}
		fields = true
		name, value, _ := bytes.Cut(text, []byte(":"))
		value = bytes.TrimPrefix(value, []byte(" "))
		switch string(name) {
		case "event":
			ev.name = string(value)
		case "data":
			data = append(data, value)
		}
		// Comments (":..."), id and retry are forwarded, not read.
	}
}

// readLine reads one line (with its end), and stops with errEventTooLarge
// once the event would be larger than max bytes.
func (s *sseReader) readLine(have int) ([]byte, error) {
	var line []byte
	for {
		chunk, err := s.br.ReadSlice('\n')
		line = append(line, chunk...)
		if have+len(line) > s.max {
			// The bytes read are returned with the error: they are
			// counted and passed on, not lost.
			return line, errEventTooLarge
		}
		switch {
		case err == nil:
			return line, nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		default:
			return line, err
		}
	}
}
