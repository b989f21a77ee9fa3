package credentials

import (
	"bufio"
	"compress/flate"
	"compress/gzip"
	"compress/zlib"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// The agent chooses its requests' Accept-Encoding (curl --compressed), and
// what an upstream compresses neither the scrubbing of the real value nor
// the meter can read. So the proxy asks every credential destination for
// no encoding at all (identity), decodes the two that HTTP clients have
// always had to read (gzip, deflate) when an upstream compresses anyway,
// and refuses every other answer with a body: br, zstd, compress and
// anything unknown (docs/credentials.md).
//
// Request bodies stay as the agent sent them, Content-Encoding included:
// the stand-in is swapped in headers only, and the meter reads answers,
// not requests.

// maxCodings bounds the codings stacked on one answer ("gzip, gzip").
const maxCodings = 3

// identity is the one encoding the proxy asks for.
const identity = "identity"

// codings lists resp's content codings in the order they were applied,
// without identity.
func codings(h http.Header) []string {
	var out []string
	for _, v := range h.Values("Content-Encoding") {
		for _, c := range strings.Split(v, ",") {
			c = strings.ToLower(strings.TrimSpace(c))
			if c != "" && c != identity {
				out = append(out, c)
			}
		}
	}
	return out
}

// decode replaces resp's body by its decoded bytes, as they arrive (a
// stream's events are not held back), and drops Content-Encoding. It
// returns a description of the encoding it cannot read, "" when none.
func decode(resp *http.Response) string {
	cs := codings(resp.Header)
	if len(cs) == 0 || resp.Body == nil || resp.Body == http.NoBody {
		resp.Header.Del("Content-Encoding")
		return ""
	}
	if len(cs) > maxCodings {
		return fmt.Sprintf("%d stacked codings", len(cs))
	}
	for _, c := range cs {
		if c != "gzip" && c != "x-gzip" && c != "deflate" {
			return fmt.Sprintf("Content-Encoding %q", trimForDetail(c))
		}
	}
	body := resp.Body
	var r io.Reader = body
	for i := len(cs) - 1; i >= 0; i-- {
		r = &lazyDecoder{src: r, coding: cs[i]}
	}
	resp.Body = decoded{Reader: r, Closer: body}
	resp.Header.Del("Content-Encoding")
	return ""
}

// trimForDetail keeps an upstream's header value short in what the proxy
// writes (the client's error, a warning).
func trimForDetail(s string) string {
	if len(s) > 32 {
		return s[:32] + "..."
	}
	return s
}

type decoded struct {
	io.Reader
	io.Closer
}

// lazyDecoder starts decoding at the first Read, so that the proxy can
// send the answer's headers before the first byte of its body arrives.
type lazyDecoder struct {
	src    io.Reader
	coding string
	r      io.Reader
	err    error
}

func (d *lazyDecoder) Read(p []byte) (int, error) {
	if d.r == nil && d.err == nil {
		br := bufio.NewReader(d.src)
		switch d.coding {
		case "gzip", "x-gzip":
			d.r, d.err = gzip.NewReader(br)
		case "deflate":
			// HTTP's deflate is zlib (RFC 9110 8.4.1.2), but servers have
			// long sent raw deflate too; a zlib header tells them apart.
			if h, err := br.Peek(2); err == nil && h[0]&0x0f == 8 && (uint16(h[0])<<8|uint16(h[1]))%31 == 0 {
				d.r, d.err = zlib.NewReader(br)
			} else {
				d.r = flate.NewReader(br)
			}
		}
		if d.err != nil {
			d.err = fmt.Errorf("agentrun proxy: the answer's %s body: %w", d.coding, d.err)
		}
	}
	if d.err != nil {
		return 0, d.err
	}
	return d.r.Read(p)
}
