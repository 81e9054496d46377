package e2e

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sundialhq/sundial/internal/proctest"
	"github.com/sundialhq/sundial/pkg/queue/queuetest"
)

// TestPprofEndpoint runs the API and a worker with SUNDIAL_PPROF_ADDR: each
// serves a CPU profile and its goroutines there, the API's own address does
// not serve them, and an address already taken stops a worker at start
// (status 1, naming the variable) instead of running unprofiled.
func TestPprofEndpoint(t *testing.T) {
	t.Parallel()
	srv := queuetest.Start(t)
	apiAddr, apiPprof, workerPprof := proctest.FreeAddr(t), proctest.FreeAddr(t), proctest.FreeAddr(t)
	startProc(t, binary(t, "api"), serviceEnv(srv, "SUNDIAL_HTTP_ADDR="+apiAddr, "SUNDIAL_HISTORY=off",
		"SUNDIAL_PPROF_ADDR="+apiPprof)...)
	startProc(t, binary(t, "worker"), serviceEnv(srv, "SUNDIAL_PPROF_ADDR="+workerPprof)...)
	hc := &http.Client{Timeout: 10 * time.Second}
	get := func(url string) (int, []byte) {
		res, err := hc.Get(url)
		if err != nil {
			return 0, nil
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, b
	}
	for name, addr := range map[string]string{"api": apiPprof, "worker": workerPprof} {
		base := "http://" + addr + "/debug/pprof/"
		queuetest.Eventually(t, 20*time.Second, name+"'s profiling endpoint answers", func() bool {
			code, _ := get(base)
			return code == http.StatusOK
		})
		code, prof := get(base + "profile?seconds=1")
		if code != http.StatusOK || !bytes.HasPrefix(prof, []byte{0x1f, 0x8b}) {
			t.Fatalf("%s: CPU profile: status %d, %d bytes, want 200 and a gzipped profile", name, code, len(prof))
		}
		code, gr := get(base + "goroutine?debug=1")
		if code != http.StatusOK || !strings.Contains(string(gr), "goroutine profile:") {
			t.Fatalf("%s: goroutines: status %d: %.200s", name, code, gr)
		}
	}
	queuetest.Eventually(t, 20*time.Second, "the API is ready", func() bool { return proctest.Ready(hc, "http://"+apiAddr) })
	if code, _ := get("http://" + apiAddr + "/debug/pprof/"); code != http.StatusNotFound {
		t.Fatalf("the API's own address answers /debug/pprof/ with %d, want 404", code)
	}

	taken := startProc(t, binary(t, "worker"), serviceEnv(srv, "SUNDIAL_PPROF_ADDR="+workerPprof)...)
	select {
	case <-taken.Done():
	case <-time.After(20 * time.Second):
		t.Fatal("a worker whose SUNDIAL_PPROF_ADDR is taken kept running")
	}
	if taken.ExitCode() != 1 || !strings.Contains(taken.Output(), "SUNDIAL_PPROF_ADDR") {
		t.Fatalf("exit code %d, output:\n%s\nwant 1 and a message naming SUNDIAL_PPROF_ADDR", taken.ExitCode(), taken.Output())
	}
}
