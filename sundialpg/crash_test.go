package sundialpg_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sundialhq/sundial"
	"github.com/sundialhq/sundial/internal/proctest"
	"github.com/sundialhq/sundial/pkg/queue/queuetest"
)

// pollerEnv is a poller's environment relaying e's outbox.
func (e *env) pollerEnv(metrics string, extra ...string) []string {
	return append([]string{
		"SUNDIAL_REDIS_URL=" + e.redis.URL(),
		"SUNDIAL_HISTORY=off",
		"SUNDIAL_LOG_LEVEL=warn",
		"SUNDIAL_METRICS_ADDR=" + metrics,
		"SUNDIAL_OUTBOX_POSTGRES_URL=" + e.url,
	}, extra...)
}

// commitMany commits n jobs of type typ, 10 to a transaction.
func (e *env) commitMany(t *testing.T, typ string, n int) []string {
	t.Helper()
	var ids []string
	for i := 0; i < n; i += 10 {
		jobs := make([]sundial.Args, min(10, n-i))
		for k := range jobs {
			jobs[k] = sundial.Job{Type: typ, Payload: i + k}
		}
		ids = append(ids, e.commit(t, jobs...)...)
	}
	return ids
}

// A poller killed (-9) right after each step of a pass (rows read, jobs in
// Redis, rows deleted), then started again: every committed row makes one
// job. The crash point is the test-only SUNDIAL_OUTBOX_TEST_CRASH.
func TestPollerKilledAtEachStep(t *testing.T) {
	bin := proctest.Binary(t, "poller")
	for _, tc := range []struct {
		step            string
		inRedis, inRows int // after the crash
	}{
		{"read", 0, 50},
		{"submitted", 50, 50},
		{"deleted", 50, 0},
	} {
		t.Run(tc.step, func(t *testing.T) {
			e := setup(t)
			ids := e.commitMany(t, "crash", 50)
			p := proctest.Start(t, bin, e.pollerEnv("off", "SUNDIAL_OUTBOX_TEST_CRASH="+tc.step)...)
			select {
			case <-p.Done():
			case <-time.After(60 * time.Second):
				t.Fatalf("the poller did not crash at %s:\n%s", tc.step, p.Output())
			}
			if got := len(e.submitted(t, "default")); got != tc.inRedis {
				t.Errorf("after the crash: %d jobs in Redis, want %d", got, tc.inRedis)
			}
			if got := e.rows(t); got != tc.inRows {
				t.Errorf("after the crash: %d rows, want %d", got, tc.inRows)
			}
			metrics := proctest.FreeAddr(t)
			proctest.Start(t, bin, e.pollerEnv(metrics)...)
			ids = append(ids, e.commitMany(t, "after", 10)...)
			e.awaitRelayed(t, 30*time.Second)
			e.exactlyOnce(t, "default", ids)

			body := get(t, "http://"+metrics+"/metrics")
			if want := `sundial_outbox_relayed_rows_total{store="postgres"} ` + map[bool]string{true: "10", false: "60"}[tc.step == "deleted"]; !strings.Contains(body, want) {
				t.Errorf("/metrics lacks %q", want)
			}
			if !strings.Contains(body, `sundial_outbox_lag_seconds{store="postgres"} 0`) {
				t.Errorf("/metrics lacks the lag at 0")
			}
			var ready struct {
				Status  string
				Checks  map[string]string
				Details map[string]float64
			}
			if err := json.Unmarshal([]byte(get(t, "http://"+metrics+"/readyz")), &ready); err != nil {
				t.Fatal(err)
			}
			if lag, ok := ready.Details["outbox_postgres_lag_seconds"]; ready.Status != "ok" || ready.Checks["outbox_postgres"] != "ok" || !ok || lag != 0 {
				t.Errorf("/readyz = %+v", ready)
			}

			// The API (another process) shows the relay as its leader wrote
			// it: every row counted once across the crash, no lag, running.
			addr := proctest.FreeAddr(t)
			proctest.Start(t, proctest.Binary(t, "api"), "SUNDIAL_REDIS_URL="+e.redis.URL(), "SUNDIAL_HISTORY=off",
				"SUNDIAL_LOG_LEVEL=warn", "SUNDIAL_METRICS_ADDR=off", "SUNDIAL_HTTP_ADDR="+addr)
			var view struct {
				Relays []struct {
					Store      string  `json:"store"`
					LagSeconds float64 `json:"lag_seconds"`
					Relayed    int64   `json:"relayed"`
					Running    bool    `json:"running"`
				} `json:"relays"`
			}
			queuetest.Eventually(t, 30*time.Second, "GET /v1/outbox showing every row relayed", func() bool {
				if err := json.Unmarshal([]byte(get(t, "http://"+addr+"/v1/outbox")), &view); err != nil {
					t.Fatal(err)
				}
				return len(view.Relays) == 1 && view.Relays[0].Relayed == 60 && view.Relays[0].LagSeconds == 0
			})
			if r := view.Relays[0]; r.Store != "postgres" || !r.Running {
				t.Errorf("GET /v1/outbox = %+v", view)
			}
		})
	}
}

// A poller killed (-9) from outside while it relays a stream of commits,
// and started again, twice: every committed row makes one job.
func TestPollerKilledUnderLoad(t *testing.T) {
	bin := proctest.Binary(t, "poller")
	e := setup(t)
	p := proctest.Start(t, bin, e.pollerEnv("off")...)
	done := make(chan []string)
	go func() {
		var ids []string
		for i := range 200 {
			jobs := make([]sundial.Args, 10)
			for k := range jobs {
				jobs[k] = sundial.Job{Type: "load", Payload: i*10 + k}
			}
			ids = append(ids, e.commit(t, jobs...)...)
		}
		done <- ids
	}()
	for round, at := range []int{200, 1000} {
		queuetest.Eventually(t, 60*time.Second, "jobs relayed", func() bool { return len(e.submitted(t, "default")) >= at })
		p.Kill()
		t.Logf("kill %d after %d jobs, %d rows waiting", round+1, len(e.submitted(t, "default")), e.rows(t))
		p.Restart(t)
	}
	ids := <-done
	e.awaitRelayed(t, 60*time.Second)
	e.exactlyOnce(t, "default", ids)
}

func get(t *testing.T, url string) string {
	t.Helper()
	var body string
	queuetest.Eventually(t, 30*time.Second, "GET "+url, func() bool {
		res, err := http.Get(url)
		if err != nil {
			return false
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		body = string(b)
		return res.StatusCode == http.StatusOK
	})
	return body
}

// A poller whose PostgreSQL database is not there yet keeps its other
// duties, says so on /readyz, and starts relaying once the database is
// there (it creates the table itself).
func TestPollerWaitsForPostgres(t *testing.T) {
	e := setup(t)
	later := e.url + "_later"
	metrics := proctest.FreeAddr(t)
	vars := e.pollerEnv(metrics)
	vars[len(vars)-1] = "SUNDIAL_OUTBOX_POSTGRES_URL=" + later
	p := proctest.Start(t, proctest.Binary(t, "poller"), vars...)
	queuetest.Eventually(t, 30*time.Second, "/readyz to name the outbox unavailable", func() bool {
		res, err := http.Get("http://" + metrics + "/readyz")
		if err != nil {
			return false
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode == http.StatusServiceUnavailable && strings.Contains(string(b), `"outbox_postgres":"unavailable"`)
	})
	if _, err := e.pool.Exec(e.ctx, "CREATE DATABASE "+later[strings.LastIndex(later, "/")+1:]); err != nil {
		t.Fatal(err)
	}
	laterEnv := &env{ctx: e.ctx, url: later, redis: e.redis, q: e.q}
	pool, err := pgxpool.New(e.ctx, later)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	laterEnv.pool = pool
	queuetest.Eventually(t, 30*time.Second, "the poller to create the table", func() bool {
		var ok bool
		return pool.QueryRow(e.ctx, "SELECT to_regclass('sundial_outbox') IS NOT NULL").Scan(&ok) == nil && ok
	})
	ids := laterEnv.commitMany(t, "later", 5)
	laterEnv.awaitRelayed(t, 30*time.Second)
	laterEnv.exactlyOnce(t, "default", ids)
	select {
	case <-p.Done():
		t.Fatalf("the poller exited:\n%s", p.Output())
	default:
	}
}
