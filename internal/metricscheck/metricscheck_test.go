package metricscheck

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/sundialhq/sundial/internal/mongotest"
	"github.com/sundialhq/sundial/internal/proctest"
	"github.com/sundialhq/sundial/pkg/job"
	"github.com/sundialhq/sundial/pkg/queue"
	"github.com/sundialhq/sundial/pkg/queue/queuetest"
	"github.com/sundialhq/sundial/sundialpg"
)

func TestMain(m *testing.M) {
	code := mongotest.Run(m)
	proctest.Cleanup()
	os.Exit(code)
}

// repo is the repository's root.
var repo = func() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "../..")
}()

var (
	dashboardDir = filepath.Join(repo, "deploy/grafana")
	rulesFile    = filepath.Join(repo, "deploy/prometheus/sundial-rules.yaml")
	runbookFile  = filepath.Join(repo, "docs/operations.md")
)

// query is one PromQL expression and where it comes from.
type query struct {
	where string
	expr  string
}

// dashboard is the part of a Grafana dashboard's JSON model the checks read.
type dashboard struct {
	file          string
	Inputs        []map[string]any `json:"__inputs"`
	UID           string           `json:"uid"`
	Title         string           `json:"title"`
	SchemaVersion int              `json:"schemaVersion"`
	Panels        []panel          `json:"panels"`
	Templating    struct {
		List []struct {
			Name       string         `json:"name"`
			Type       string         `json:"type"`
			Datasource map[string]any `json:"datasource"`
			Query      struct {
				Query string `json:"query"`
			} `json:"query"`
		} `json:"list"`
	} `json:"templating"`
}

type panel struct {
	ID         int            `json:"id"`
	Type       string         `json:"type"`
	Title      string         `json:"title"`
	Datasource map[string]any `json:"datasource"`
	GridPos    *struct {
		H, W, X, Y int
	} `json:"gridPos"`
	Targets []struct {
		RefID      string         `json:"refId"`
		Expr       string         `json:"expr"`
		Datasource map[string]any `json:"datasource"`
	} `json:"targets"`
}

func loadDashboards(t *testing.T) []dashboard {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dashboardDir, "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no dashboards in %s (%v)", dashboardDir, err)
	}
	var ds []dashboard
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var d dashboard
		if err := json.Unmarshal(b, &d); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		d.file = filepath.Base(f)
		ds = append(ds, d)
	}
	return ds
}

// ruleExprs returns each alert's expr from the rules file: the value after
// "expr:", or the indented block under "expr: |".
func ruleExprs(t *testing.T) []query {
	t.Helper()
	b, err := os.ReadFile(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")
	indent := func(s string) int { return len(s) - len(strings.TrimLeft(s, " ")) }
	var qs []query
	alert, alerts := "", 0
	for i := 0; i < len(lines); i++ {
		l := strings.TrimSpace(lines[i])
		if a, ok := strings.CutPrefix(l, "- alert:"); ok {
			alert = strings.TrimSpace(a)
			alerts++
			continue
		}
		v, ok := strings.CutPrefix(l, "expr:")
		if !ok {
			continue
		}
		v = strings.TrimSpace(v)
		if v == "|" || v == "|-" || v == ">" || v == ">-" {
			var block []string
			for in := indent(lines[i]); i+1 < len(lines) && (strings.TrimSpace(lines[i+1]) == "" || indent(lines[i+1]) > in); i++ {
				block = append(block, lines[i+1])
			}
			v = strings.Join(block, "\n")
		}
		qs = append(qs, query{where: "rule " + alert, expr: v})
	}
	if alerts == 0 || len(qs) != alerts {
		t.Fatalf("%s: %d alerts, %d exprs read", rulesFile, alerts, len(qs))
	}
	return qs
}

// dashboardQueries returns every panel query and template variable query.
func dashboardQueries(t *testing.T) []query {
	var qs []query
	for _, d := range loadDashboards(t) {
		for _, p := range d.Panels {
			for _, tg := range p.Targets {
				qs = append(qs, query{where: fmt.Sprintf("%s panel %q %s", d.file, p.Title, tg.RefID), expr: tg.Expr})
			}
		}
		for _, v := range d.Templating.List {
			qs = append(qs, query{where: fmt.Sprintf("%s variable %s", d.file, v.Name), expr: v.Query.Query})
		}
	}
	return qs
}

// metricName finds the metric names in PromQL: Sundial's own series and the
// Go runtime's and process's (go_*, process_*). Label names and values and
// the functions around them never take these prefixes.
var metricName = regexp.MustCompile(`(?:^|[^a-zA-Z0-9_:"=])((?:sundial|process|go)_[a-z0-9_]+)`)

func names(expr string) []string {
	var out []string
	for _, m := range metricName.FindAllStringSubmatch(expr, -1) {
		out = append(out, m[1])
	}
	return out
}

func TestNamesTokenizer(t *testing.T) {
	got := names(`histogram_quantile(0.95, sum by (le) (rate(sundial_job_duration_seconds_bucket{queue=~"$queue", job="go_x"}[5m])))` +
		` / on (queue) max by (queue) (sundial_queue_depth{state="queued"}) and on (instance) process_cpu_seconds_total` +
		` count by (version, goversion) (sundial_build_info)`)
	want := []string{"sundial_job_duration_seconds_bucket", "sundial_queue_depth", "process_cpu_seconds_total", "sundial_build_info"}
	if !slices.Equal(got, want) {
		t.Fatalf("names %v, want %v", got, want)
	}
}

// TestDashboardStructure checks what an import into Grafana needs and what
// the schema leaves optional: one Prometheus input, every panel and query on
// it, a query in every target, unique ids and refIds, panels inside the
// 24-column grid and not overlapping, template variables from label_values.
func TestDashboardStructure(t *testing.T) {
	uids := map[string]string{}
	for _, d := range loadDashboards(t) {
		t.Run(d.file, func(t *testing.T) {
			if d.SchemaVersion < 39 {
				t.Errorf("schemaVersion %d, want 39 or later", d.SchemaVersion)
			}
			if d.UID == "" || d.Title == "" {
				t.Error("no uid or title")
			}
			if other, dup := uids[d.UID]; dup {
				t.Errorf("uid %s also in %s", d.UID, other)
			}
			uids[d.UID] = d.file
			if len(d.Inputs) != 1 || d.Inputs[0]["name"] != "DS_PROMETHEUS" || d.Inputs[0]["pluginId"] != "prometheus" {
				t.Errorf("__inputs %v, want one Prometheus data source DS_PROMETHEUS", d.Inputs)
			}
			isDS := func(ds map[string]any) bool { return ds["type"] == "prometheus" && ds["uid"] == "${DS_PROMETHEUS}" }
			ids := map[int]bool{}
			type cell struct{ x, y int }
			taken := map[cell]string{}
			queries := 0
			for _, p := range d.Panels {
				if ids[p.ID] || p.ID <= 0 {
					t.Errorf("panel %q: id %d repeated or not positive", p.Title, p.ID)
				}
				ids[p.ID] = true
				g := p.GridPos
				if g == nil || g.W <= 0 || g.H <= 0 || g.X < 0 || g.Y < 0 || g.X+g.W > 24 {
					t.Errorf("panel %q: gridPos %+v outside the 24-column grid", p.Title, g)
					continue
				}
				for x := g.X; x < g.X+g.W; x++ {
					for y := g.Y; y < g.Y+g.H; y++ {
						if o, ok := taken[cell{x, y}]; ok {
							t.Errorf("panel %q overlaps %q at (%d,%d)", p.Title, o, x, y)
						}
						taken[cell{x, y}] = p.Title
					}
				}
				if p.Type == "row" {
					continue
				}
				if !slices.Contains([]string{"timeseries", "stat"}, p.Type) {
					t.Errorf("panel %q: type %q", p.Title, p.Type)
				}
				if !isDS(p.Datasource) {
					t.Errorf("panel %q: datasource %v, want ${DS_PROMETHEUS}", p.Title, p.Datasource)
				}
				if len(p.Targets) == 0 {
					t.Errorf("panel %q: no queries", p.Title)
				}
				refs := map[string]bool{}
				for _, tg := range p.Targets {
					queries++
					if tg.RefID == "" || refs[tg.RefID] {
						t.Errorf("panel %q: refId %q empty or repeated", p.Title, tg.RefID)
					}
					refs[tg.RefID] = true
					if strings.TrimSpace(tg.Expr) == "" || !isDS(tg.Datasource) {
						t.Errorf("panel %q %s: empty expr or datasource %v", p.Title, tg.RefID, tg.Datasource)
					}
				}
			}
			if queries == 0 {
				t.Error("no queries")
			}
			for _, v := range d.Templating.List {
				if v.Type != "query" || !isDS(v.Datasource) || !strings.HasPrefix(v.Query.Query, "label_values(") {
					t.Errorf("variable %s: type %s, datasource %v, query %q; want a label_values query on ${DS_PROMETHEUS}", v.Name, v.Type, v.Datasource, v.Query.Query)
				}
			}
		})
	}
}

// TestDashboardQueriesParse runs every dashboard query through Prometheus'
// own parser: promtool check rules over a file of recording rules, one per
// query, with Grafana's variables replaced by what they expand to.
func TestDashboardQueriesParse(t *testing.T) {
	promtool := proctest.NeedTool(t, "promtool")
	vars := strings.NewReplacer("$__rate_interval", "5m", "$queue", ".*", "$type", ".*")
	var b strings.Builder
	b.WriteString("groups:\n  - name: dashboards\n    rules:\n")
	for i, q := range dashboardQueries(t) {
		if strings.HasPrefix(q.expr, "label_values(") {
			// A Grafana function: its argument is the selector.
			q.expr = strings.TrimSuffix(strings.TrimPrefix(q.expr, "label_values("), ")")
			q.expr = q.expr[:strings.LastIndex(q.expr, ",")]
		}
		e, _ := json.Marshal(vars.Replace(q.expr))
		fmt.Fprintf(&b, "      # %s\n      - record: dashboard_query_%d\n        expr: %s\n", q.where, i, e)
	}
	f := filepath.Join(t.TempDir(), "dashboards.rules.yaml")
	if err := os.WriteFile(f, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(promtool, "check", "rules", f).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool check rules: %v\n%s\n%s", err, out, b.String())
	}
}

// TestRunbookLinks: every alert's runbook_url points at a heading of
// docs/operations.md (GitHub's anchor: lower case, spaces to hyphens,
// punctuation dropped).
func TestRunbookLinks(t *testing.T) {
	doc, err := os.ReadFile(runbookFile)
	if err != nil {
		t.Fatal(err)
	}
	anchors := map[string]bool{}
	drop := regexp.MustCompile(`[^a-z0-9 _-]`)
	for _, l := range strings.Split(string(doc), "\n") {
		if h, ok := strings.CutPrefix(l, "#"); ok && strings.HasPrefix(strings.TrimLeft(h, "#"), " ") {
			s := drop.ReplaceAllString(strings.ToLower(strings.TrimSpace(strings.TrimLeft(h, "#"))), "")
			anchors[strings.ReplaceAll(s, " ", "-")] = true
		}
	}
	b, err := os.ReadFile(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	urls := regexp.MustCompile(`runbook_url: "([^"]*)"`).FindAllStringSubmatch(string(b), -1)
	if len(urls) != len(ruleExprs(t)) {
		t.Fatalf("%d runbook_urls for %d alerts", len(urls), len(ruleExprs(t)))
	}
	const base = "https://github.com/sundialhq/sundial/blob/main/docs/operations.md#"
	for _, u := range urls {
		a, ok := strings.CutPrefix(u[1], base)
		if !ok || !anchors[a] {
			t.Errorf("runbook_url %s: not %s followed by a heading of docs/operations.md", u[1], base)
		}
	}
}

// TestQueriesNameExportedSeries starts the real API, a worker and a poller
// (history on over the MongoDB stand-in, a PostgreSQL outbox) on a private
// redis-server, runs jobs that succeed, fail, die and wait for a handler,
// breaks one queue's keys so a poller step fails, and then requires every
// metric name of every dashboard query and rule expression among the series
// the three serve on /metrics. A renamed metric fails here.
func TestQueriesNameExportedSeries(t *testing.T) {
	var want = map[string][]string{} // name → where it is used
	for _, q := range append(dashboardQueries(t), ruleExprs(t)...) {
		ns := names(q.expr)
		if len(ns) == 0 && !strings.HasPrefix(q.where, "rule") {
			t.Errorf("%s: no metric name in %q", q.where, q.expr)
		}
		for _, n := range ns {
			want[n] = append(want[n], q.where)
		}
	}

	srv := queuetest.Start(t)
	mongoURI, mongoDB := mongotest.Start(t)
	pg := mongotest.PostgresURL(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pool, err := pgxpool.New(ctx, pg)
	if err != nil {
		t.Fatal(err)
	}
	if err := sundialpg.Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	pool.Close()

	apiAddr, workerAddr, pollerAddr := proctest.FreeAddr(t), proctest.FreeAddr(t), proctest.FreeAddr(t)
	env := []string{"SUNDIAL_REDIS_URL=" + srv.URL(), "SUNDIAL_LOG_LEVEL=warn", "SUNDIAL_HISTORY=on",
		"SUNDIAL_MONGO_URI=" + mongoURI, "SUNDIAL_MONGO_DB=" + mongoDB,
		"SUNDIAL_LEASE_TTL=1s", "SUNDIAL_LEASE_GRACE=200ms", "SUNDIAL_HEARTBEAT_INTERVAL=200ms"}
	procs := map[string]*proctest.Proc{
		"api":    proctest.Start(t, proctest.Binary(t, "api"), append(env, "SUNDIAL_HTTP_ADDR="+apiAddr)...),
		"worker": proctest.Start(t, proctest.Binary(t, "worker"), append(env, "SUNDIAL_METRICS_ADDR="+workerAddr, "SUNDIAL_QUEUES=metrics")...),
		"poller": proctest.Start(t, proctest.Binary(t, "poller"), append(env, "SUNDIAL_METRICS_ADDR="+pollerAddr,
			"SUNDIAL_JOB_RETENTION=1s", "SUNDIAL_UNHANDLED_TIMEOUT=1s", "SUNDIAL_OUTBOX_POSTGRES_URL="+pg)...),
	}
	endpoints := map[string]string{
		"api":    "http://" + apiAddr + "/metrics",
		"worker": "http://" + workerAddr + "/metrics",
		"poller": "http://" + pollerAddr + "/metrics",
	}

	q := queue.New(srv.Client(), queue.Options{})
	ptr := func(n int) *int { return &n }
	specs := []job.Spec{
		{Queue: "metrics", Type: "sundial.echo", Payload: json.RawMessage(`{"hello":1}`)},
		{Queue: "metrics", Type: "sundial.echo", Payload: json.RawMessage(`{"hello":2}`)},
		// fails once, then succeeds: a failed attempt and a duration of each outcome
		{Queue: "metrics", Type: "sundial.fail", Payload: json.RawMessage(`{"times":1}`), MaxAttempts: ptr(3), Backoff: &job.Backoff{}},
		// ends dead
		{Queue: "metrics", Type: "sundial.fail", Payload: json.RawMessage(`{"times":5}`), MaxAttempts: ptr(1)},
		// no worker handles it: unhandled, then dead after SUNDIAL_UNHANDLED_TIMEOUT
		{Queue: "metrics", Type: "metricscheck.nobody"},
		// a queue whose keys the test breaks below
		{Queue: "broken", Type: "sundial.echo"},
	}
	var jobs []*job.Job
	for _, s := range specs {
		j, err := s.Build(time.Now())
		if err != nil {
			t.Fatal(err)
		}
		jobs = append(jobs, j)
	}
	// The API discovers queues' streams as they appear: wait until it
	// serves, so that it counts the events from the first.
	hc := &http.Client{Timeout: 5 * time.Second}
	queuetest.Eventually(t, 30*time.Second, "the API ready", func() bool { return proctest.Ready(hc, "http://"+apiAddr) })
	for _, j := range jobs { // one call per queue: a batch targets one queue
		if _, err := q.Submit(context.Background(), []*job.Job{j}); err != nil {
			t.Fatal(err)
		}
	}
	// One of broken's keys of the wrong type: the poller's steps on it fail
	// (sundial_poller_queue_errors_total), every other queue is served. The
	// API's stats read every queue at once and would fail from then on: break
	// it once the depth gauges hold a value (they keep it).
	queuetest.Eventually(t, 30*time.Second, "the API's queue depth of both queues", func() bool {
		res, err := hc.Get(endpoints["api"])
		if err != nil {
			return false
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return strings.Contains(string(b), `sundial_queue_depth{queue="broken"`) && strings.Contains(string(b), `sundial_queue_depth{queue="metrics"`)
	})
	scheduled := strings.TrimSuffix(queue.EventStreamKey("broken"), "events") + "scheduled"
	if err := srv.Client().Set(context.Background(), scheduled, "not a sorted set", 0).Err(); err != nil {
		t.Fatal(err)
	}

	scrape := func() (map[string]bool, error) {
		got := map[string]bool{}
		for name, url := range endpoints {
			res, err := hc.Get(url)
			if err != nil {
				return nil, fmt.Errorf("%s: %v", name, err)
			}
			b, err := io.ReadAll(res.Body)
			res.Body.Close()
			if err != nil || res.StatusCode != http.StatusOK {
				return nil, fmt.Errorf("%s: %d %v", name, res.StatusCode, err)
			}
			for _, l := range strings.Split(string(b), "\n") {
				if l == "" || l[0] == '#' {
					continue
				}
				if i := strings.IndexAny(l, "{ "); i > 0 {
					got[l[:i]] = true
				}
			}
		}
		return got, nil
	}
	missing := func(got map[string]bool) []string {
		var m []string
		for n := range want {
			if !got[n] {
				m = append(m, n)
			}
		}
		slices.Sort(m)
		return m
	}

	deadline := time.Now().Add(90 * time.Second)
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	var last []string
	var lastErr error
	for {
		for name, p := range procs {
			select {
			case <-p.Done():
				t.Fatalf("%s exited (code %d):\n%s", name, p.ExitCode(), p.Output())
			default:
			}
		}
		got, err := scrape()
		lastErr = err
		if err == nil {
			if last = missing(got); len(last) == 0 {
				t.Logf("%d metric names of %d dashboard and rule queries, all served by the binaries", len(want), len(dashboardQueries(t))+len(ruleExprs(t)))
				return
			}
		}
		if time.Now().After(deadline) {
			break
		}
		<-tick.C
	}
	var b strings.Builder
	for _, n := range last {
		fmt.Fprintf(&b, "\n  %s (used by %s)", n, strings.Join(want[n], "; "))
	}
	t.Fatalf("after 90 s (last scrape error: %v), metric names no binary serves:%s", lastErr, b.String())
}
