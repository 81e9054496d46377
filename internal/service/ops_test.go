package service

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/sundialhq/sundial/internal/freeport"
)

// listenOrTaken listens on 127.0.0.1:p; nil when another process has the
// port, which is as taken as the test wants it.
func listenOrTaken(t *testing.T, p int) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
	if err != nil {
		return nil
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

func portOf(ln net.Listener) int { return ln.Addr().(*net.TCPAddr).Port }

// SUNDIAL_METRICS_ADDR=auto never fails for a taken port: it takes the
// next free one from its base, then any free port; an explicit address
// that is taken is an error, and off binds nothing.
func TestListenOps(t *testing.T) {
	base, err := freeport.Port()
	if err != nil {
		t.Fatal(err)
	}
	first, err := ListenOps("auto", base)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	if portOf(first) != base {
		t.Fatalf("auto took port %d while its base %d was free", portOf(first), base)
	}
	second, err := ListenOps("auto", base)
	if err != nil {
		t.Fatalf("auto with its base taken: %v, want the next free port", err)
	}
	defer second.Close()
	if p := portOf(second); p <= base || p >= base+AutoPorts {
		t.Fatalf("auto with its base taken took %d, want one of %d…%d", p, base+1, base+AutoPorts-1)
	}

	// Every port of the range taken: any free port.
	for p := base; p < base+AutoPorts; p++ {
		if p != portOf(first) && p != portOf(second) {
			listenOrTaken(t, p)
		}
	}
	third, err := ListenOps("", base)
	if err != nil {
		t.Fatalf("auto with its whole range taken: %v, want any free port", err)
	}
	defer third.Close()
	if p := portOf(third); p >= base && p < base+AutoPorts {
		t.Fatalf("auto took %d, which is taken", p)
	}

	if _, err := ListenOps(first.Addr().String(), base); err == nil {
		t.Fatal("an explicit address that is taken was bound")
	}
	if ln, err := ListenOps("off", base); ln != nil || err != nil {
		t.Fatalf("off: %v, %v; want nothing bound", ln, err)
	}
}

// The registry's metrics_url names a loopback endpoint by its address and a
// wildcard one by the host's name.
func TestMetricsURL(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if got, want := MetricsURL(ln), "http://"+ln.Addr().String()+"/metrics"; got != want {
		t.Fatalf("MetricsURL = %q, want %q", got, want)
	}
	wild, err := net.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	defer wild.Close()
	host, _ := os.Hostname()
	if got, want := MetricsURL(wild), "http://"+net.JoinHostPort(host, strconv.Itoa(portOf(wild)))+"/metrics"; got != want {
		t.Fatalf("MetricsURL of a wildcard address = %q, want %q", got, want)
	}
}

// /readyz answers within readyTimeout even when a check ignores its
// deadline (go-redis reads a reply for up to 5 s whatever the context),
// and names the check that did not answer.
func TestReadyzAnswersWithinItsBound(t *testing.T) {
	release := make(chan struct{})
	var once sync.Once
	stop := func() { once.Do(func() { close(release) }) }
	time.AfterFunc(10*time.Second, stop) // a /readyz that waits fails rather than hangs
	defer stop()
	o := NewOps()
	o.Check("redis", func(context.Context) error { <-release; return nil })
	o.Check("mongodb", func(context.Context) error { return nil })
	srv := httptest.NewServer(o.Handler())
	defer srv.Close()
	began := time.Now()
	res, err := http.Get(srv.URL + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var body struct{ Checks map[string]string }
	if err := json.NewDecoder(res.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(began); took > readyTimeout+time.Second {
		t.Fatalf("/readyz took %v, want about %v", took, readyTimeout)
	}
	if res.StatusCode != http.StatusServiceUnavailable || body.Checks["redis"] != "unavailable" || body.Checks["mongodb"] != "ok" {
		t.Fatalf("/readyz: %d %v, want 503 with redis unavailable and mongodb ok", res.StatusCode, body.Checks)
	}
}

// A detail is reported beside the checks and never makes /readyz fail;
// one that fails or hangs is left out.
func TestReadyzDetails(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	o := NewOps()
	o.Check("redis", func(context.Context) error { return nil })
	o.Detail("lag_seconds", func(context.Context) (any, error) { return 1.5, nil })
	o.Detail("broken", func(context.Context) (any, error) { return nil, context.Canceled })
	o.Detail("hung", func(context.Context) (any, error) { <-release; return 1, nil })
	srv := httptest.NewServer(o.Handler())
	defer srv.Close()
	res, err := http.Get(srv.URL + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var body struct {
		Status  string
		Details map[string]any
	}
	if err := json.NewDecoder(res.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != http.StatusOK || body.Status != "ok" || len(body.Details) != 1 || body.Details["lag_seconds"] != 1.5 {
		t.Fatalf("/readyz: %d %+v", res.StatusCode, body)
	}
}
