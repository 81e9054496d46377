package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sundialhq/sundial/internal/buildinfo"
	"github.com/sundialhq/sundial/internal/proctest"
	"github.com/sundialhq/sundial/pkg/queue/queuetest"
)

// TestEveryBinaryTellsItsVersion: every binary answers --version with the
// release of internal/buildinfo, the API's GET /v1/version says the same,
// and /metrics of the API and of a worker export sundial_build_info with it.
func TestEveryBinaryTellsItsVersion(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if out, err := exec.Command("go", "build", "-o", dir+"/", "github.com/sundialhq/sundial/cmd/sundial",
		"github.com/sundialhq/sundial/cmd/sundial-probe", "github.com/sundialhq/sundial/cmd/sundial-bench").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	bins := map[string]string{"api": binary(t, "api"), "worker": binary(t, "worker"), "poller": binary(t, "poller"),
		"cli": filepath.Join(dir, "sundial"), "probe": filepath.Join(dir, "sundial-probe"), "bench": filepath.Join(dir, "sundial-bench")}
	for name, bin := range bins {
		out, err := exec.Command(bin, "--version").Output()
		if err != nil || !strings.HasPrefix(string(out), "sundial-"+name+" "+buildinfo.Version+" (go") {
			t.Errorf("%s --version: %q %v", name, out, err)
		}
	}

	srv := queuetest.Start(t)
	addr := proctest.FreeAddr(t)
	metricsAddr := proctest.FreeAddr(t)
	startProc(t, binary(t, "api"), serviceEnv(srv, "SUNDIAL_HTTP_ADDR="+addr, "SUNDIAL_HISTORY=off")...)
	startProc(t, binary(t, "worker"), serviceEnv(srv, "SUNDIAL_METRICS_ADDR="+metricsAddr)...)
	pollerMetrics := proctest.FreeAddr(t)
	startProc(t, binary(t, "poller"), serviceEnv(srv, "SUNDIAL_METRICS_ADDR="+pollerMetrics, "SUNDIAL_HISTORY=off")...)
	hc := &http.Client{Timeout: 5 * time.Second}
	get := func(url string) string {
		res, err := hc.Get(url)
		if err != nil {
			return ""
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return string(b)
	}
	var v struct{ Version, Go string }
	queuetest.Eventually(t, 20*time.Second, "GET /v1/version", func() bool {
		return json.Unmarshal([]byte(get("http://"+addr+"/v1/version")), &v) == nil && v.Version != ""
	})
	if v.Version != buildinfo.Version || !strings.HasPrefix(v.Go, "go") {
		t.Fatalf("GET /v1/version = %+v, want %s", v, buildinfo.Version)
	}
	series := `sundial_build_info{goversion="` + v.Go + `",version="` + buildinfo.Version + `"} 1`
	if m := get("http://" + addr + "/metrics"); !strings.Contains(m, series) {
		t.Fatalf("the API's /metrics lacks %s", series)
	}
	queuetest.Eventually(t, 20*time.Second, "the worker's /metrics has "+series, func() bool {
		return strings.Contains(get("http://"+metricsAddr+"/metrics"), series)
	})
	queuetest.Eventually(t, 20*time.Second, "the poller's /metrics has "+series, func() bool {
		return strings.Contains(get("http://"+pollerMetrics+"/metrics"), series)
	})

	// Every sundial_ series the three export is in the metrics reference.
	ref, err := os.ReadFile("../../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	help := regexp.MustCompile(`(?m)^# HELP (sundial_[a-z0-9_]+) `)
	seen := 0
	for who, url := range map[string]string{"api": "http://" + addr + "/metrics", "worker": "http://" + metricsAddr + "/metrics", "poller": "http://" + pollerMetrics + "/metrics"} {
		for _, m := range help.FindAllStringSubmatch(get(url), -1) {
			seen++
			if !strings.Contains(string(ref), "| `"+m[1]+"` |") {
				t.Errorf("the %s exports %s, which docs/metrics.md does not list", who, m[1])
			}
		}
	}
	if seen < 10 { // label vectors show only once observed
		t.Fatalf("only %d sundial_ series seen across the three /metrics", seen)
	}
}
