package builtin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sundialhq/sundial/pkg/egress"
	"github.com/sundialhq/sundial/pkg/job"
	"github.com/sundialhq/sundial/pkg/worker"
)

// hookServer is a webhook receiver on one loopback address that counts the
// requests it gets.
type hookServer struct {
	*httptest.Server
	hits atomic.Int64
	port string
}

// startHook starts a receiver listening on addr ("127.0.0.1:0",
// "[::1]:0") with handler h (nil: answer 200 "secret body").
func startHook(t *testing.T, addr string, h http.HandlerFunc) *hookServer {
	t.Helper()
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Skipf("cannot listen on %s: %v", addr, err)
	}
	s := &hookServer{}
	if h == nil {
		h = func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "secret body") }
	}
	s.Server = &httptest.Server{Listener: l, Config: &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.hits.Add(1)
		h(w, r)
	})}}
	s.Start()
	t.Cleanup(s.Close)
	_, s.port, _ = net.SplitHostPort(l.Addr().String())
	return s
}

// names maps host names to addresses, as DNS would, without DNS.
type names map[string]string

func (n names) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if a, ok := n[host]; ok {
		return []netip.Addr{netip.MustParseAddr(a)}, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

// handler returns sundial.http under the policy allow, names resolved by
// resolver.
func handler(t *testing.T, allow string, resolver egress.Resolver) *HTTP {
	t.Helper()
	p, err := egress.ParsePolicy(allow)
	if err != nil {
		t.Fatal(err)
	}
	p.Resolver = resolver
	return NewHTTP(p)
}

func send(t *testing.T, h worker.Handler, payload map[string]any) (map[string]any, error) {
	t.Helper()
	b, err := json.Marshal(payload)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	res, err := h.Work(ctx, &job.Job{Type: "sundial.http", Payload: b, Attempt: 1})
	if err != nil {
		return nil, err
	}
	m, ok := res.(map[string]any)
	if !ok {
		t.Fatalf("result %T, want a map", res)
	}
	return m, nil
}

// refused checks that err is a refusal by the policy that is not retried
// and says want.
func refused(t *testing.T, err error, want string) {
	t.Helper()
	var r *egress.RefusedError
	if !errors.As(err, &r) {
		t.Fatalf("err = %v, want a refusal by the webhook policy", err)
	}
	if !errors.Is(err, worker.ErrNoRetry) {
		t.Errorf("a refusal must not be retried: %v", err)
	}
	if !strings.HasPrefix(err.Error(), "sundial.http: ") || !strings.Contains(err.Error(), "refused by the webhook policy (allow it with SUNDIAL_HTTP_JOB_ALLOW)") || !strings.Contains(err.Error(), want) {
		t.Errorf("err = %q, want it to say %q and name the policy and SUNDIAL_HTTP_JOB_ALLOW", err, want)
	}
}

func TestHTTPRefusedByDefault(t *testing.T) {
	v4 := startHook(t, "127.0.0.1:0", nil)
	v6 := startHook(t, "[::1]:0", nil)
	resolver := names{"evil.test": "127.0.0.1", "evil6.test": "::1"}
	for _, c := range []struct {
		name, url, want string
		server          *hookServer
	}{
		{"loopback", v4.URL + "/hook", "127.0.0.1:" + v4.port + " is a loopback address", v4},
		{"IPv6 loopback", v6.URL + "/hook", "[::1]:" + v6.port + " is a loopback address", v6},
		{"IPv4-mapped loopback", "http://[::ffff:127.0.0.1]:" + v4.port + "/", "is a loopback address", v4},
		{"localhost", "http://localhost:" + v4.port + "/", "a loopback address", v4},
		{"a name resolving to loopback", "http://evil.test:" + v4.port + "/", "evil.test:" + v4.port + " resolves to 127.0.0.1, a loopback address", v4},
		{"a name resolving to IPv6 loopback", "http://evil6.test:" + v6.port + "/", "resolves to ::1, a loopback address", v6},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := handler(t, "", resolver)
			if c.name == "localhost" {
				h = handler(t, "", nil) // the system's resolver
			}
			before := c.server.hits.Load()
			_, err := send(t, h, map[string]any{"url": c.url})
			refused(t, err, c.want)
			if n := c.server.hits.Load() - before; n != 0 {
				t.Errorf("the receiver got %d requests; the policy must refuse before connecting", n)
			}
		})
	}
}

// TestHTTPRefusesUnreachable: a private address and the metadata address
// are refused by the policy at once, before any connection attempt (one
// would time out here).
func TestHTTPRefusesUnreachable(t *testing.T) {
	h := handler(t, "", names{"metadata.test": "169.254.169.254", "db.test": "10.0.0.7"})
	for _, c := range []struct{ url, want string }{
		{"http://10.255.255.1/hook", "10.255.255.1:80 is a private address"},
		{"http://192.168.0.1:8443/", "192.168.0.1:8443 is a private address"},
		{"http://169.254.169.254/latest/meta-data/iam/security-credentials/", "169.254.169.254:80 is a cloud metadata address"},
		{"http://[fd00:ec2::254]/latest/meta-data/", "[fd00:ec2::254]:80 is a cloud metadata address"},
		{"http://metadata.test/computeMetadata/v1/", "metadata.test:80 resolves to 169.254.169.254, a cloud metadata address"},
		{"https://db.test/", "db.test:443 resolves to 10.0.0.7, a private address"},
		{"http://100.64.1.1/", "a shared (carrier-grade NAT) address"},
		{"http://0.0.0.0:8080/", "an unspecified address"},
	} {
		start := time.Now()
		_, err := send(t, h, map[string]any{"url": c.url})
		refused(t, err, c.want)
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("%s: refused after %v; the policy must refuse before connecting", c.url, d)
		}
	}
}

func TestHTTPAllowedWhenListed(t *testing.T) {
	v4 := startHook(t, "127.0.0.1:0", nil)
	v6 := startHook(t, "[::1]:0", nil)
	resolver := names{"hooks.test": "127.0.0.1", "a.corp.test": "::1"}
	for _, c := range []struct {
		name, allow, url string
		server           *hookServer
	}{
		{"loopback address", "127.0.0.1", v4.URL + "/hook", v4},
		{"loopback address and port", "127.0.0.1:" + v4.port, v4.URL + "/hook", v4},
		{"loopback prefix", "127.0.0.0/8", v4.URL, v4},
		{"IPv6 loopback", "::1", v6.URL, v6},
		{"a name", "hooks.test", "http://hooks.test:" + v4.port + "/", v4},
		{"a pattern", "*.corp.test", "http://a.corp.test:" + v6.port + "/", v6},
		{"the address a name resolves to", "127.0.0.1", "http://hooks.test:" + v4.port + "/", v4},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := c.server.hits.Load()
			res, err := send(t, handler(t, c.allow, resolver), map[string]any{"url": c.url})
			if err != nil {
				t.Fatalf("allowed by %q: %v", c.allow, err)
			}
			if res["status"] != 200 {
				t.Errorf("result %v, want status 200", res)
			}
			if _, ok := res["body"]; ok {
				t.Errorf("result %v keeps the body; only keep_body asks for it", res)
			}
			if n := c.server.hits.Load() - before; n != 1 {
				t.Errorf("the receiver got %d requests, want 1", n)
			}
		})
	}
	// Listing one address does not list another.
	_, err := send(t, handler(t, "127.0.0.1", nil), map[string]any{"url": v6.URL})
	refused(t, err, "[::1]:"+v6.port+" is a loopback address")
	_, err = send(t, handler(t, "127.0.0.1:1", nil), map[string]any{"url": v4.URL})
	refused(t, err, "127.0.0.1:"+v4.port+" is a loopback address")
}

func TestHTTPKeepBody(t *testing.T) {
	big := strings.Repeat("x", 10_000)
	s := startHook(t, "127.0.0.1:0", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/big" {
			fmt.Fprint(w, big)
			return
		}
		w.Header().Set("X-Internal", "do-not-keep")
		fmt.Fprint(w, "secret body")
	})
	h := handler(t, "127.0.0.1", nil)
	res, err := send(t, h, map[string]any{"url": s.URL, "method": "GET"})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(res) != "map[status:200]" {
		t.Errorf("without keep_body the result is %v, want only the status", res)
	}
	res, err = send(t, h, map[string]any{"url": s.URL, "method": "GET", "keep_body": true})
	if err != nil {
		t.Fatal(err)
	}
	if res["status"] != 200 || res["body"] != "secret body" {
		t.Errorf("with keep_body the result is %v, want the status and the body", res)
	}
	res, err = send(t, h, map[string]any{"url": s.URL + "/big", "method": "GET", "keep_body": true})
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := res["body"].(string); b != big[:maxBodyKept] {
		t.Errorf("kept %d bytes of a 10000-byte body, want the first %d", len(b), maxBodyKept)
	}
}

func TestHTTPRedirects(t *testing.T) {
	refusedTarget := startHook(t, "127.0.0.1:0", nil)
	v6Target := startHook(t, "[::1]:0", nil)
	hooks := startHook(t, "127.0.0.1:0", func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/to-address":
			http.Redirect(w, r, refusedTarget.URL+"/internal", http.StatusFound)
		case "/to-name":
			http.Redirect(w, r, "http://evil.test:"+refusedTarget.port+"/internal", http.StatusFound)
		case "/to-v6":
			http.Redirect(w, r, v6Target.URL+"/internal", http.StatusTemporaryRedirect)
		case "/to-metadata":
			http.Redirect(w, r, "http://169.254.169.254/latest/meta-data/", http.StatusFound)
		case "/to-file":
			http.Redirect(w, r, "file:///etc/passwd", http.StatusFound)
		case "/hop":
			n := 0
			fmt.Sscan(r.URL.Query().Get("n"), &n)
			if n > 0 {
				http.Redirect(w, r, fmt.Sprintf("/hop?n=%d", n-1), http.StatusFound)
				return
			}
			fmt.Fprint(w, "arrived")
		default:
			fmt.Fprint(w, "ok")
		}
	})
	resolver := names{"hooks.test": "127.0.0.1", "evil.test": "127.0.0.1"}
	h := handler(t, "hooks.test", resolver) // hooks.test is allowed, whatever it resolves to; 127.0.0.1 is not
	base := "http://hooks.test:" + hooks.port
	for _, c := range []struct {
		path, want string
		target     *hookServer
	}{
		{"/to-address", "127.0.0.1:" + refusedTarget.port + " is a loopback address", refusedTarget},
		{"/to-name", "evil.test:" + refusedTarget.port + " resolves to 127.0.0.1, a loopback address", refusedTarget},
		{"/to-v6", "[::1]:" + v6Target.port + " is a loopback address", v6Target},
		{"/to-metadata", "169.254.169.254:80 is a cloud metadata address", nil},
	} {
		t.Run(strings.TrimPrefix(c.path, "/"), func(t *testing.T) {
			_, err := send(t, h, map[string]any{"url": base + c.path, "method": "GET"})
			refused(t, err, c.want)
			if c.target != nil && c.target.hits.Load() != 0 {
				t.Errorf("the redirect's target got %d requests; the policy must refuse before connecting", c.target.hits.Load())
			}
		})
	}
	// Listed, the redirect's target is reached.
	res, err := send(t, handler(t, "hooks.test,127.0.0.1", resolver), map[string]any{"url": base + "/to-address", "method": "GET"})
	if err != nil || res["status"] != 200 || refusedTarget.hits.Load() != 1 {
		t.Errorf("with the target listed: %v %v, %d requests to it", res, err, refusedTarget.hits.Load())
	}
	// Only http and https are followed.
	_, err = send(t, h, map[string]any{"url": base + "/to-file", "method": "GET"})
	if err == nil || !strings.Contains(err.Error(), "only http and https") {
		t.Errorf("a redirect to file://: %v, want a refusal", err)
	}
	// MaxRedirects are followed; one more fails without retry.
	res, err = send(t, h, map[string]any{"url": fmt.Sprintf("%s/hop?n=%d", base, MaxRedirects), "method": "GET", "keep_body": true})
	if err != nil || res["body"] != "arrived" {
		t.Errorf("%d redirects: %v %v, want them followed", MaxRedirects, res, err)
	}
	before := hooks.hits.Load()
	_, err = send(t, h, map[string]any{"url": fmt.Sprintf("%s/hop?n=%d", base, MaxRedirects+1), "method": "GET"})
	if err == nil || !errors.Is(err, worker.ErrNoRetry) || !strings.Contains(err.Error(), fmt.Sprintf("stopped after %d redirects", MaxRedirects)) {
		t.Errorf("%d redirects: %v, want a failure without retry", MaxRedirects+1, err)
	}
	if n := hooks.hits.Load() - before; n != MaxRedirects+1 {
		t.Errorf("%d requests for %d redirects, want %d", n, MaxRedirects+1, MaxRedirects+1)
	}
}

func TestHTTPFailures(t *testing.T) {
	s := startHook(t, "127.0.0.1:0", func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "internal detail", http.StatusBadGateway)
	})
	h := handler(t, "127.0.0.1", nil)
	// A non-2xx answer is retried, and its body is not in the error.
	_, err := send(t, h, map[string]any{"url": s.URL, "keep_body": true})
	if err == nil || errors.Is(err, worker.ErrNoRetry) || !strings.Contains(err.Error(), "answered 502") || strings.Contains(err.Error(), "internal detail") {
		t.Errorf("a 502: %v, want a retried failure naming the status only", err)
	}
	// Credentials in the URL are not repeated in the error.
	u, _ := url.Parse(s.URL)
	u.User = url.UserPassword("user", "hunter2")
	_, err = send(t, h, map[string]any{"url": u.String()})
	if err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Errorf("error %v repeats the URL's password", err)
	}
	// A bad payload or URL is not retried.
	for _, p := range []map[string]any{
		{"url": "ftp://example.com/"},
		{"url": "http:///nohost"},
		{"url": s.URL, "method": "BAD METHOD"},
		{"url": s.URL, "unknown": 1},
	} {
		if _, err := send(t, h, p); err == nil || !errors.Is(err, worker.ErrNoRetry) {
			t.Errorf("payload %v: %v, want a failure without retry", p, err)
		}
	}
}

// TestHTTPZeroValue: an HTTP built without NewHTTP has the default policy.
func TestHTTPZeroValue(t *testing.T) {
	s := startHook(t, "127.0.0.1:0", nil)
	_, err := send(t, &HTTP{}, map[string]any{"url": s.URL})
	refused(t, err, "is a loopback address")
	if s.hits.Load() != 0 {
		t.Error("the zero HTTP reached a loopback receiver")
	}
}
