package httpapi

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
)

// The dashboard (web/) is a single-page app: index.html plus hashed files
// under assets/. It is served at / with no key (its API calls carry one).
// Hashed assets are cached for a year; index.html is revalidated on every
// load (no-cache + ETag), so a new build reaches browsers at once. Vite
// writes a .br and a .gz beside each text asset; the server sends the one
// the browser accepts, compressing nothing per request. Any other GET of a
// path outside /v1 without a file extension (/jobs/01J…, /schedules) is a
// client route and answers index.html.

// dashboardCSP allows the app's own scripts and styles, inline style
// attributes (set by the chart library), and API calls and the websocket on
// the same host.
const dashboardCSP = "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; connect-src 'self' ws: wss:; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"

// notBuiltHTML is served at / when the binary was built without web/dist/app.
var notBuiltHTML = []byte(`<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Sundial</title></head>
<body style="font:16px system-ui,sans-serif;max-width:40em;margin:3em auto;padding:0 1em">
<h1>Sundial</h1><p>The dashboard is not built into this binary: run <code>make web</code>
(or <code>make build</code>), then build the API again. The API itself works: see
<a href="/v1/openapi.json">/v1/openapi.json</a>.</p></body></html>
`)

// dashboard is the embedded app, read once.
type dashboard struct {
	files     fs.FS // nil when not built
	index     []byte
	indexETag string
}

func newDashboard(files fs.FS) *dashboard {
	d := &dashboard{files: files, index: notBuiltHTML}
	if files != nil {
		if b, err := fs.ReadFile(files, "index.html"); err == nil {
			d.index = b
		} else {
			d.files = nil
		}
	}
	sum := sha256.Sum256(d.index)
	d.indexETag = `"` + hex.EncodeToString(sum[:8]) + `"`
	return d
}

// index handles GET /: the dashboard's index.html.
func (s *Server) index(c *gin.Context) { s.dash.serveIndex(c) }

// notFound answers requests no route matched: the dashboard's files and
// client routes for GET and HEAD outside /v1, the API's 404 otherwise.
func (s *Server) notFound(c *gin.Context) {
	r := c.Request
	p := r.URL.Path
	if (r.Method == http.MethodGet || r.Method == http.MethodHead) && !strings.HasPrefix(p, "/v1/") && p != "/v1" {
		if s.dash.serveFile(c, p) {
			return
		}
		if path.Ext(p) == "" && !strings.HasSuffix(p, "/") {
			s.dash.serveIndex(c)
			return
		}
	}
	fail(c, &apiError{Status: http.StatusNotFound, Code: codeNotFound, Message: "no such route: " + r.Method + " " + p})
}

func (d *dashboard) serveIndex(c *gin.Context) {
	h := c.Writer.Header()
	h.Set("Cache-Control", "no-cache")
	h.Set("ETag", d.indexETag)
	setPageHeaders(h)
	h.Set("Content-Type", "text/html; charset=utf-8")
	http.ServeContent(c.Writer, c.Request, "index.html", time.Time{}, bytes.NewReader(d.index))
}

// serveFile sends the file at urlPath (not index.html) when the app has it,
// precompressed when the browser accepts that. It reports whether it did.
func (d *dashboard) serveFile(c *gin.Context, urlPath string) bool {
	if d.files == nil {
		return false
	}
	name := strings.TrimPrefix(path.Clean(urlPath), "/")
	if name == "" || name == "index.html" || strings.HasSuffix(name, ".gz") || strings.HasSuffix(name, ".br") || !fs.ValidPath(name) {
		return false
	}
	plain, err := fs.ReadFile(d.files, name)
	if err != nil {
		return false
	}
	h := c.Writer.Header()
	body := plain
	if enc, data := d.encoded(name, c.Request.Header.Get("Accept-Encoding")); enc != "" {
		h.Set("Content-Encoding", enc)
		body = data
	}
	h.Add("Vary", "Accept-Encoding")
	if strings.HasPrefix(name, "assets/") {
		// Vite names these by content hash: a new build has new names.
		h.Set("Cache-Control", "public, max-age=31536000, immutable")
	} else {
		h.Set("Cache-Control", "public, max-age=3600")
	}
	ctype := mime.TypeByExtension(path.Ext(name))
	if ctype == "" {
		ctype = http.DetectContentType(plain)
	}
	h.Set("Content-Type", ctype)
	h.Set("X-Content-Type-Options", "nosniff")
	http.ServeContent(c.Writer, c.Request, "", time.Time{}, bytes.NewReader(body))
	return true
}

// encoded returns the precompressed variant of name that accept allows,
// brotli first, or "" when there is none.
func (d *dashboard) encoded(name, accept string) (string, []byte) {
	for _, v := range []struct{ enc, ext string }{{"br", ".br"}, {"gzip", ".gz"}} {
		if !acceptsEncoding(accept, v.enc) {
			continue
		}
		if b, err := fs.ReadFile(d.files, name+v.ext); err == nil {
			return v.enc, b
		}
	}
	return "", nil
}

// acceptsEncoding reports whether an Accept-Encoding header allows enc
// (listed without q=0).
func acceptsEncoding(header, enc string) bool {
	for part := range strings.SplitSeq(header, ",") {
		name, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		if !strings.EqualFold(strings.TrimSpace(name), enc) {
			continue
		}
		q := strings.ReplaceAll(strings.TrimSpace(params), " ", "")
		return q != "q=0" && q != "q=0.0" && q != "q=0.00" && q != "q=0.000"
	}
	return false
}

func setPageHeaders(h http.Header) {
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Content-Security-Policy", dashboardCSP)
}
