package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sundialhq/sundial/internal/proctest"
	"github.com/sundialhq/sundial/pkg/queue"
	"github.com/sundialhq/sundial/pkg/queue/queuetest"
)

// opsURL matches the line a service logs once its operations endpoint
// listens.
var opsURL = regexp.MustCompile(`operations endpoint listening.*url=(http://\S+)`)

// Two workers and two pollers on one host, started the same way with the
// default SUNDIAL_METRICS_ADDR (auto), all stay up: the second of each
// takes the next free port instead of exiting on "address already in
// use". Each worker's registry entry names its own /metrics, which
// answers, and GET /v1/workers/metrics-targets lists both for Prometheus.
// The ports are whichever auto finds free from 9092 (9091 for pollers),
// read back from the registry and the logs, so other processes holding
// those ports only move them further.
func TestTwoOfEachOnOneHostWithAutoMetricsPorts(t *testing.T) {
	t.Parallel()
	srv := queuetest.Start(t)
	env := []string{"SUNDIAL_REDIS_URL=" + srv.URL(), "SUNDIAL_METRICS_ADDR=auto",
		"SUNDIAL_LOG_LEVEL=info", "SUNDIAL_HEARTBEAT_INTERVAL=200ms"}
	apiAddr := proctest.FreeAddr(t)
	startProc(t, binary(t, "api"), append(env, "SUNDIAL_HTTP_ADDR="+apiAddr, "SUNDIAL_HISTORY=off")...)
	procs := map[string]*proctest.Proc{}
	for _, id := range []string{"auto-1", "auto-2"} {
		procs[id] = startProc(t, binary(t, "worker"), append(env, "SUNDIAL_WORKER_ID="+id)...)
	}
	pollers := []*proctest.Proc{
		startProc(t, binary(t, "poller"), append(env, "SUNDIAL_HISTORY=off")...),
		startProc(t, binary(t, "poller"), append(env, "SUNDIAL_HISTORY=off")...),
	}
	for i, p := range pollers {
		procs["poller-"+string(rune('1'+i))] = p
	}
	hc := &http.Client{Timeout: 5 * time.Second}
	get := func(url string) (int, string) {
		res, err := hc.Get(url)
		if err != nil {
			return 0, err.Error()
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	alive := func() {
		t.Helper()
		for name, p := range procs {
			select {
			case <-p.Done():
				t.Fatalf("%s exited (code %d):\n%s", name, p.ExitCode(), p.Output())
			default:
			}
		}
	}

	var workers struct {
		Workers []queue.WorkerInfo `json:"workers"`
	}
	queuetest.Eventually(t, 30*time.Second, "both workers registered with a metrics_url", func() bool {
		alive()
		status, body := get("http://" + apiAddr + "/v1/workers")
		if status != http.StatusOK || json.Unmarshal([]byte(body), &workers) != nil || len(workers.Workers) != 2 {
			return false
		}
		for _, w := range workers.Workers {
			if w.MetricsURL == "" {
				return false
			}
		}
		return true
	})
	a, b := workers.Workers[0].MetricsURL, workers.Workers[1].MetricsURL
	if a == b {
		t.Fatalf("both workers report metrics_url %s", a)
	}
	for _, w := range workers.Workers {
		status, body := get(w.MetricsURL)
		if status != http.StatusOK || !strings.Contains(body, "sundial_worker_") {
			t.Fatalf("%s's %s: %d, want 200 with the worker's metrics:\n%.300s", w.ID, w.MetricsURL, status, body)
		}
	}
	t.Logf("worker metrics: %s, %s", a, b)

	var targets []struct {
		Targets []string          `json:"targets"`
		Labels  map[string]string `json:"labels"`
	}
	status, body := get("http://" + apiAddr + "/v1/workers/metrics-targets")
	if status != http.StatusOK || json.Unmarshal([]byte(body), &targets) != nil || len(targets) != 2 {
		t.Fatalf("metrics targets: %d %s, want two", status, body)
	}
	for _, tg := range targets {
		want := ""
		for _, w := range workers.Workers {
			if w.ID == tg.Labels["worker_id"] {
				want = w.MetricsURL
			}
		}
		if len(tg.Targets) != 1 || want != "http://"+tg.Targets[0]+"/metrics" {
			t.Fatalf("target %+v does not match the registry's %q", tg, want)
		}
	}

	// The pollers: each logs where it serves, and both answer there.
	urls := map[string]bool{}
	for i, p := range pollers {
		var url string
		queuetest.Eventually(t, 30*time.Second, "poller's endpoint logged", func() bool {
			alive()
			m := opsURL.FindStringSubmatch(p.Output())
			if m != nil {
				url = strings.Trim(m[1], `"`)
			}
			return m != nil
		})
		if status, body := get(url + "/healthz"); status != http.StatusOK {
			t.Fatalf("poller %d's %s/healthz: %d %s", i+1, url, status, body)
		}
		urls[url] = true
	}
	if len(urls) != 2 {
		t.Fatalf("both pollers serve on %v", urls)
	}
	alive()
}
