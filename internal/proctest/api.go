package proctest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/sundialhq/sundial/internal/freeport"
)

// FreeAddr returns a free loopback host:port for a process to listen on.
func FreeAddr(t testing.TB) string {
	t.Helper()
	p, err := freeport.Port()
	if err != nil {
		t.Fatalf("free address: %v", err)
	}
	return "127.0.0.1:" + strconv.Itoa(p)
}

// NeedTool returns the path of a program the test needs; it skips the test
// when the program is missing, or fails it under CI=true.
func NeedTool(t testing.TB, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s not found on PATH", name)
		}
		t.Skipf("%s not found on PATH", name)
	}
	return p
}

// API calls one or more instances of the HTTP API, as a client that must
// get through faults would.
type API struct {
	URLs []string // base URLs, tried in turn
	HTTP *http.Client
}

// Call sends one request (body as JSON when not nil), trying the next
// instance and again after a transport error or a 503, until deadline. It
// returns the status and the body of the first other answer.
func (a *API) Call(method, path string, body any, deadline time.Duration) (int, []byte, error) {
	var payload []byte
	if body != nil {
		payload, _ = json.Marshal(body)
	}
	end := time.Now().Add(deadline)
	var last error
	for i := 0; time.Now().Before(end); i++ {
		req, _ := http.NewRequest(method, a.URLs[i%len(a.URLs)]+path, bytes.NewReader(payload))
		if body != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		res, err := a.HTTP.Do(req)
		if err == nil {
			b, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode != http.StatusServiceUnavailable {
				return res.StatusCode, b, nil
			}
			err = fmt.Errorf("503: %s", b)
		}
		last = err
		time.Sleep(time.Duration(20*min(i+1, 10)) * time.Millisecond) // back off between retries
	}
	return 0, nil, fmt.Errorf("%s %s: no answer before the deadline: %v", method, path, last)
}

// Ready reports whether the API at base answers GET /readyz with 200: the
// condition tests wait on after starting one.
func Ready(c *http.Client, base string) bool {
	res, err := c.Get(base + "/readyz")
	if err != nil {
		return false
	}
	res.Body.Close()
	return res.StatusCode == http.StatusOK
}
