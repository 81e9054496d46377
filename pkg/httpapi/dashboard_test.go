package httpapi

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/fstest"
)

// testApp is a built dashboard as Vite lays it out.
func testApp(t *testing.T) fstest.MapFS {
	t.Helper()
	js := []byte(strings.Repeat("console.log('sundial');\n", 100))
	var gz bytes.Buffer
	w := gzip.NewWriter(&gz)
	if _, err := w.Write(js); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return fstest.MapFS{
		"index.html":                {Data: []byte(`<!doctype html><script src="/assets/index-AbC123.js"></script>`)},
		"assets/index-AbC123.js":    {Data: js},
		"assets/index-AbC123.js.gz": {Data: gz.Bytes()},
		"assets/index-AbC123.js.br": {Data: []byte("brotli bytes")},
		"favicon.svg":               {Data: []byte(`<svg xmlns="http://www.w3.org/2000/svg"/>`)},
	}
}

func TestDashboardServesTheApp(t *testing.T) {
	app := testApp(t)
	a := start(t, func(c *Config) { c.Dashboard = app; c.APIKeys = []string{"k"} })

	// index.html: no key, revalidated every time, with an ETag that answers 304.
	res := a.do("GET", "/", nil)
	if res.status != http.StatusOK || !bytes.Equal(res.body, app["index.html"].Data) {
		t.Fatalf("GET /: %d %q", res.status, res.body)
	}
	if got := res.header.Get("Cache-Control"); got != "no-cache" {
		t.Errorf("index Cache-Control %q", got)
	}
	if !strings.HasPrefix(res.header.Get("Content-Type"), "text/html") || res.header.Get("Content-Security-Policy") == "" {
		t.Errorf("index headers %v", res.header)
	}
	etag := res.header.Get("ETag")
	if res := a.do("GET", "/", nil, "If-None-Match", etag); res.status != http.StatusNotModified {
		t.Errorf("If-None-Match: %d", res.status)
	}

	// Client routes answer index.html, for deep links and reloads.
	for _, p := range []string{"/jobs", "/jobs/01JD3X", "/schedules/new", "/dead/default"} {
		if res := a.do("GET", p, nil); res.status != http.StatusOK || !bytes.Equal(res.body, app["index.html"].Data) {
			t.Errorf("GET %s: %d %q", p, res.status, res.body)
		}
	}

	// Hashed assets: immutable, precompressed by what the browser accepts.
	for _, tc := range []struct{ accept, enc string }{
		{"gzip, deflate, br", "br"},
		{"gzip", "gzip"},
		{"br;q=0, gzip;q=0.5", "gzip"},
		{"identity", ""},
	} {
		res := a.do("GET", "/assets/index-AbC123.js", nil, "Accept-Encoding", tc.accept)
		if res.status != http.StatusOK {
			t.Fatalf("asset with %q: %d", tc.accept, res.status)
		}
		if got := res.header.Get("Content-Encoding"); got != tc.enc {
			t.Errorf("Accept-Encoding %q: Content-Encoding %q, want %q", tc.accept, got, tc.enc)
		}
		if got := res.header.Get("Cache-Control"); got != "public, max-age=31536000, immutable" {
			t.Errorf("asset Cache-Control %q", got)
		}
		if !strings.Contains(res.header.Get("Vary"), "Accept-Encoding") || !strings.HasPrefix(res.header.Get("Content-Type"), "text/javascript") {
			t.Errorf("asset headers %v", res.header)
		}
		var body []byte
		switch tc.enc {
		case "gzip":
			r, err := gzip.NewReader(bytes.NewReader(res.body))
			if err != nil {
				t.Fatal(err)
			}
			if body, err = io.ReadAll(r); err != nil {
				t.Fatal(err)
			}
		case "br":
			body = app["assets/index-AbC123.js"].Data
			if string(res.body) != "brotli bytes" {
				t.Errorf("br body %q", res.body)
			}
		default:
			body = res.body
		}
		if !bytes.Equal(body, app["assets/index-AbC123.js"].Data) {
			t.Errorf("%q: body differs", tc.accept)
		}
	}
	if res := a.do("GET", "/favicon.svg", nil); res.status != http.StatusOK || res.header.Get("Content-Type") != "image/svg+xml" {
		t.Errorf("favicon: %d %v", res.status, res.header)
	}

	// Missing files, the compressed copies themselves, and /v1 stay 404s.
	for _, p := range []string{"/assets/nope.js", "/assets/index-AbC123.js.gz", "/v1/nothing", "/../index.html"} {
		if res := a.do("GET", p, nil, "Authorization", "Bearer k"); res.status != http.StatusNotFound {
			t.Errorf("GET %s: %d", p, res.status)
		}
	}
	a.do("POST", "/jobs", nil).wantError(t, http.StatusNotFound, codeNotFound, "")
}

func TestDashboardNotBuilt(t *testing.T) {
	a := start(t, func(c *Config) { c.Dashboard = fstest.MapFS{"README.md": {Data: []byte("x")}} })
	res := a.do("GET", "/", nil)
	if res.status != http.StatusOK || !strings.Contains(string(res.body), "make web") {
		t.Fatalf("GET /: %d %q", res.status, res.body)
	}
	if res := a.do("GET", "/jobs", nil); res.status != http.StatusOK || !strings.Contains(string(res.body), "make web") {
		t.Fatalf("GET /jobs: %d", res.status)
	}
}

func TestAcceptsEncoding(t *testing.T) {
	for _, tc := range []struct {
		header, enc string
		want        bool
	}{
		{"gzip, br", "br", true},
		{"GZIP", "gzip", true},
		{"gzip;q=0", "gzip", false},
		{"gzip; q=0.000", "gzip", false},
		{"gzip;q=0.1", "gzip", true},
		{"deflate", "gzip", false},
		{"", "gzip", false},
	} {
		if got := acceptsEncoding(tc.header, tc.enc); got != tc.want {
			t.Errorf("acceptsEncoding(%q, %q) = %v", tc.header, tc.enc, got)
		}
	}
}
