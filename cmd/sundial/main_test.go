package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sundialhq/sundial/internal/logbuf"
	"github.com/sundialhq/sundial/internal/mongotest"
	"github.com/sundialhq/sundial/pkg/httpapi"
	"github.com/sundialhq/sundial/pkg/queue"
	"github.com/sundialhq/sundial/pkg/queue/queuetest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	// mongotest starts PostgreSQL + FerretDB only for the tests that ask
	// (the audit log's).
	code := mongotest.Run(m)
	if code == 0 {
		if err := goleak.Find(queuetest.IgnorePoolRedial); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// server is a real API server over a private Redis.
type server struct {
	url string
	q   *queue.Client
}

func startServer(t *testing.T, keys ...string) *server {
	t.Helper()
	return startServerWith(t, httpapi.Config{APIKeys: keys})
}

// startServerWith runs an API configured by cfg (its Queue, rate limit,
// shutdown and logger filled in).
func startServerWith(t *testing.T, cfg httpapi.Config) *server {
	t.Helper()
	t.Parallel()
	srv := queuetest.Start(t)
	q := queue.New(srv.Client(), queue.Options{})
	cfg.Queue, cfg.RateLimit, cfg.ShutdownTimeout, cfg.Logger = q, "0", time.Second, slog.New(slog.DiscardHandler)
	api, err := httpapi.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- api.Run(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("API Run: %v", err)
		}
	})
	return &server{url: "http://" + ln.Addr().String(), q: q}
}

// result is one run of the CLI.
type result struct {
	code           int
	stdout, stderr string
}

// cli runs the CLI in-process against s with args, stdin and extra
// environment variables as name=value.
func (s *server) cli(t *testing.T, stdin string, args []string, vars ...string) result {
	t.Helper()
	return s.cliCtx(context.Background(), t, stdin, args, &logbuf.Buffer{}, vars...)
}

func (s *server) cliCtx(ctx context.Context, t *testing.T, stdin string, args []string, out *logbuf.Buffer, vars ...string) result {
	t.Helper()
	envs := map[string]string{"SUNDIAL_URL": s.url}
	for _, v := range vars {
		k, val, _ := strings.Cut(v, "=")
		envs[k] = val
	}
	var errb logbuf.Buffer
	code := run(ctx, args, &env{stdin: strings.NewReader(stdin), stdout: out, stderr: &errb, getenv: func(k string) string { return envs[k] }})
	return result{code: code, stdout: out.String(), stderr: errb.String()}
}

func (r result) want(t *testing.T, code int, contains ...string) result {
	t.Helper()
	if r.code != code {
		t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", r.code, code, r.stdout, r.stderr)
	}
	for _, c := range contains {
		if !strings.Contains(r.stdout+r.stderr, c) {
			t.Fatalf("output lacks %q\nstdout: %s\nstderr: %s", c, r.stdout, r.stderr)
		}
	}
	return r
}

func args(s string) []string { return strings.Fields(s) }

func TestSchedulesCommands(t *testing.T) {
	s := startServer(t)
	s.cli(t, "", args("schedules put nightly --cron @daily --tz Europe/Berlin --type report.build --queue reports --payload {\"n\":1}")).
		want(t, exitOK, "created schedule nightly", "@daily (Europe/Berlin)", "Upcoming:")
	s.cli(t, "", args("schedules put nightly --cron 0 3 * * * --type report.build --queue reports")).
		want(t, exitUsage) // an unquoted cron expression: extra arguments
	s.cli(t, "", []string{"schedules", "put", "nightly", "--cron", "0 3 * * *", "--tz", "Europe/Berlin", "--type", "report.build", "--queue", "reports"}).
		want(t, exitOK, "replaced schedule nightly", "0 3 * * *")
	s.cli(t, `{"id": "tick", "every_seconds": 30, "job": {"type": "tick"}}`, args("schedules put -f -")).
		want(t, exitOK, "created schedule tick", "every 30s")
	// put replaces the whole schedule: without -f, the flags must name the job type.
	s.cli(t, "", args("schedules put tick --every 2m")).want(t, exitError, "field job.type")
}

func TestSchedulesLifecycle(t *testing.T) {
	s := startServer(t)
	s.cli(t, `{"every_seconds": 60, "job": {"queue": "reports", "type": "report.build", "priority": "low"}}`, args("schedules put hourly -f -")).
		want(t, exitOK, "created schedule hourly")
	s.cli(t, "", args("schedules put tick --every 5m --type tick")).want(t, exitOK, "every 5m0s")

	r := s.cli(t, "", args("schedules list")).want(t, exitOK, "ID", "hourly", "reports", "every 1m0s", "tick")
	if strings.Index(r.stdout, "hourly") > strings.Index(r.stdout, "tick") {
		t.Fatalf("list is not ordered by id:\n%s", r.stdout)
	}
	var list struct {
		Schedules []map[string]any `json:"schedules"`
	}
	r = s.cli(t, "", args("schedules list --queue reports --json")).want(t, exitOK)
	if err := json.Unmarshal([]byte(r.stdout), &list); err != nil || len(list.Schedules) != 1 || list.Schedules[0]["id"] != "hourly" {
		t.Fatalf("list --json: %v %s", err, r.stdout)
	}
	r = s.cli(t, "", args("schedules get hourly --json")).want(t, exitOK)
	var one map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &one); err != nil || len(one["upcoming"].([]any)) != 5 {
		t.Fatalf("get --json: %v %s", err, r.stdout)
	}

	s.cli(t, "", args("schedules disable hourly")).want(t, exitOK, "schedule hourly disabled; next run -")
	s.cli(t, "", args("schedules get hourly")).want(t, exitOK, "State:", "disabled")
	s.cli(t, "", args("schedules enable hourly")).want(t, exitOK, "schedule hourly enabled; next run 20")

	r = s.cli(t, "", args("schedules trigger hourly")).want(t, exitOK, "triggered schedule hourly: job ")
	id := strings.Fields(strings.SplitN(r.stdout, "job ", 2)[1])[0]
	s.cli(t, "", args("jobs get "+id)).want(t, exitOK, "Queue:", "reports", "report.build", "low")

	s.cli(t, "", args("schedules info")).want(t, exitOK, "2 schedules, 2 enabled, 0 disabled; next: ", "IN", "in ")
	s.cli(t, "", args("schedules info -R")).want(t, exitOK, "Queue default: 1 schedule", "Queue reports: 1 schedule")

	s.cli(t, "", args("schedules delete hourly")).want(t, exitOK, "deleted schedule hourly")
	s.cli(t, "", args("schedules get hourly")).want(t, exitNotFound, "schedule not found", "not_found, HTTP 404")
	s.cli(t, "", args("schedules delete hourly")).want(t, exitNotFound)
}

func TestSchedulesErrors(t *testing.T) {
	s := startServer(t)
	r := s.cli(t, "", []string{"schedules", "put", "bad", "--cron", "61 * * * *", "--type", "x"}).want(t, exitError, "field cron", "invalid_argument, HTTP 400")
	if r.stdout != "" {
		t.Fatalf("an error printed to stdout: %s", r.stdout)
	}
	s.cli(t, "", args("schedules put bad --cron @daily --tz Mars/Base --type x")).want(t, exitError, "field timezone")
	s.cli(t, `{"cron": "@daily", "every_seconds": 5, "job": {"type": "x"}}`, args("schedules put bad -f -")).want(t, exitError, "field cron", "not both")
	s.cli(t, "", args("schedules put bad --every 10 --type x --priority top")).want(t, exitError, "field job.priority")
	s.cli(t, "", args("schedules put bad --every 1.5s --type x")).want(t, exitUsage, "whole seconds")
	s.cli(t, "not json", args("schedules put bad -f -")).want(t, exitUsage, "JSON object")
	s.cli(t, "", args("schedules put bad -f /nonexistent.json")).want(t, exitUsage, "cannot read")

	s.cli(t, "", nil).want(t, exitUsage, "no command", "Usage: sundial")
	s.cli(t, "", args("frobnicate")).want(t, exitUsage, `unknown command "frobnicate"`)
	s.cli(t, "", args("schedules")).want(t, exitUsage, "give a subcommand")
	s.cli(t, "", args("schedules get")).want(t, exitUsage, "one argument")
	s.cli(t, "", args("schedules list --bogus")).want(t, exitUsage, "flag provided but not defined: -bogus")
	s.cli(t, "", args("help")).want(t, exitOK, "Commands:", "schedules")
	for _, h := range []string{"-h", "--help"} { // asked for: the command list, on stdout
		if r := s.cli(t, "", args(h)).want(t, exitOK); !strings.Contains(r.stdout, "Commands:") || !strings.Contains(r.stdout, "-api-key") || r.stderr != "" {
			t.Fatalf("sundial %s: stdout %q, stderr %q", h, r.stdout, r.stderr)
		}
	}
	// Help shows the flags, never the API key taken from the environment.
	for _, a := range []string{"--help", "jobs list -h"} {
		if r := s.cli(t, "", args(a), "SUNDIAL_API_KEY=sk-secret-123"); strings.Contains(r.stdout+r.stderr, "sk-secret-123") {
			t.Fatalf("sundial %s prints the API key:\n%s%s", a, r.stdout, r.stderr)
		}
	}
	s.cli(t, "", args("schedules list"), "SUNDIAL_URL=http://127.0.0.1:1").want(t, exitError, "cannot reach the API at http://127.0.0.1:1")
}

func TestAPIKey(t *testing.T) {
	s := startServer(t, "sekret")
	s.cli(t, "", args("queues")).want(t, exitError, "unauthenticated", "HTTP 401")
	s.cli(t, "", args("queues"), "SUNDIAL_API_KEY=sekret").want(t, exitOK, "QUEUE")
	s.cli(t, "", args("queues --api-key sekret")).want(t, exitOK, "QUEUE")
}

func TestJobsQueuesDead(t *testing.T) {
	s := startServer(t)
	r := s.cli(t, "", args("jobs submit --type email.send --queue mail --payload {\"to\":\"a@b\"} --priority high --max-attempts 1")).
		want(t, exitOK, "submitted job ", "State:", "queued", "high")
	id := strings.Fields(strings.SplitN(r.stdout, "submitted job ", 2)[1])[0]
	s.cli(t, "", args("jobs submit --queue mail")).want(t, exitError, "field type")
	s.cli(t, "", args("jobs cancel "+id)).want(t, exitOK, "cancelled")
	s.cli(t, "", args("jobs cancel "+id)).want(t, exitError, "conflict, HTTP 409")
	s.cli(t, "", args("jobs retry "+id+" --json")).want(t, exitOK, `"state": "queued"`)
	s.cli(t, "", args("jobs get nosuchjob")).want(t, exitNotFound)

	s.cli(t, "", args("queues")).want(t, exitOK, "QUEUE", "mail")
	s.cli(t, "", args("queues mail --json")).want(t, exitOK, `"name": "mail"`)

	// Make the job dead: claim it and report it dead, as a worker would.
	ctx := context.Background()
	leases, err := s.q.Claim(ctx, "mail", 1, "test-worker")
	if err != nil || len(leases) != 1 {
		t.Fatalf("claim: %v %v", leases, err)
	}
	if _, err := s.q.Complete(ctx, "mail", []queue.Outcome{{ID: id, Token: leases[0].Token, Kind: queue.OutcomeDead, Error: "smtp: 550 no such user", WorkerID: "test-worker"}}); err != nil {
		t.Fatal(err)
	}
	s.cli(t, "", args("dead list mail")).want(t, exitOK, id, "smtp: 550 no such user")
	s.cli(t, "", args("dead retry mail "+id)).want(t, exitOK, "retried 1 job from the dead letters of mail")
	leases, _ = s.q.Claim(ctx, "mail", 1, "test-worker")
	if _, err := s.q.Complete(ctx, "mail", []queue.Outcome{{ID: id, Token: leases[0].Token, Kind: queue.OutcomeDead, Error: "again", WorkerID: "test-worker"}}); err != nil {
		t.Fatal(err)
	}
	s.cli(t, "", args("dead purge mail")).want(t, exitUsage, "--yes")
	s.cli(t, "", args("dead purge mail --yes")).want(t, exitOK, "deleted 1 job")
	s.cli(t, "", args("dead list")).want(t, exitUsage, "queue name")
}

// TestStorageCommand shows the storage format (the newest on a new Redis), the
// API as its reader, and a worker of an older release.
func TestStorageCommand(t *testing.T) {
	s := startServer(t)
	s.cli(t, "", args("storage")).want(t, exitOK, "storage format 4 (this API reads 1, 2, 3, 4, writes 4)", "ROLE", "api")
	s.cli(t, "", args("storage --json")).want(t, exitOK, `"format": "4"`, `"role": "api"`)
	s.cli(t, "", args("storage extra")).want(t, exitUsage, "no arguments")
	old := queue.WorkerInfo{ID: "old-1", Hostname: "elsewhere", PID: 7, Queues: []string{"default"}, ActiveJobs: []string{}, StartedAt: time.Now()}
	if err := s.q.Heartbeat(context.Background(), old, time.Minute); err != nil {
		t.Fatal(err)
	}
	s.cli(t, "", args("storage")).want(t, exitOK, "workers not registered (a release from before the storage format): old-1")
	// A Redis still at format 1 while a process that reads only format 1
	// runs: the command says what holds format 4 back.
	ctx, rdb := context.Background(), s.q.Redis()
	rdb.ZAdd(ctx, "sundial:{.storage}:readers", redis.Z{Score: float64(time.Now().Add(time.Minute).UnixMilli()), Member: "old-reader"})
	rdb.HSet(ctx, "sundial:{.storage}:reader-info", "old-reader", `{"id":"old-reader","role":"worker","reads":[1],"writes":1}`)
	rdb.Del(ctx, "sundial:{.storage}:format")
	s.cli(t, "", args("storage")).want(t, exitOK, "storage format 1", "format 4 is written once no process lacks it; these read older formats only: old-reader")
}

// TestLimitsCommands sets, lists and deletes a limit and submits a grouped
// job the limit holds back.
func TestLimitsCommands(t *testing.T) {
	s := startServer(t)
	s.cli(t, "", args("limits set mail smtp --types email.send --key customer --concurrency 1 --rate 100/1m")).
		want(t, exitOK, "created limit smtp of mail: 0 active, 0 held back")
	s.cli(t, "", args("limits set mail smtp --concurrency 2")).want(t, exitOK, "replaced limit smtp of mail")
	s.cli(t, "", args("limits set mail smtp --types email.send --concurrency 1 --rate 100/1m")).want(t, exitOK, "replaced")
	for range 2 {
		s.cli(t, "", args("jobs submit --type email.send --queue mail --group tenant-1")).want(t, exitOK, "submitted job ")
	}
	if ls, err := s.q.Claim(context.Background(), "mail", 5, "w"); err != nil || len(ls) != 1 {
		t.Fatalf("claim under the limit: %v %v", ls, err)
	}
	s.cli(t, "", args("limits list mail")).want(t, exitOK, "LIMIT", "smtp", "email.send", "100/1m0s", "1")
	s.cli(t, "", args("queues mail")).want(t, exitOK, "THROTTLED", "UNHANDLED")
	s.cli(t, "", args("queues mail --json")).want(t, exitOK, `"throttled": 1`)
	s.cli(t, "", args("limits set mail smtp --rate 5")).want(t, exitUsage, "N/PERIOD")
	s.cli(t, "", args("limits set mail smtp --concurrency 0")).want(t, exitError, "concurrency")
	s.cli(t, "", args("limits set mail")).want(t, exitUsage, "the limit's name")
	s.cli(t, "", args("limits delete mail smtp")).want(t, exitOK, "deleted limit smtp of mail")
	s.cli(t, "", args("limits delete mail smtp")).want(t, exitNotFound)
	s.cli(t, "", args("limits list nope")).want(t, exitNotFound)
}

// TestInfoWatch redraws until interrupted, then exits 0.
func TestInfoWatch(t *testing.T) {
	s := startServer(t)
	s.cli(t, "", args("schedules put w --every 60 --type x")).want(t, exitOK)
	ctx, cancel := context.WithCancel(context.Background())
	out := &logbuf.Buffer{}
	done := make(chan result, 1)
	go func() { done <- s.cliCtx(ctx, t, "", args("schedules info -i 100ms"), out) }()
	queuetest.Eventually(t, 5*time.Second, "two redraws", func() bool { return strings.Count(out.String(), "Ctrl-C") >= 2 })
	cancel()
	r := <-done
	r.want(t, exitOK, "1 schedule, 1 enabled")
}
