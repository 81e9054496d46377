package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sundialhq/sundial/internal/logbuf"
	"github.com/sundialhq/sundial/pkg/queue"
)

// postLogs sends lines for the job under the lease token as a worker does
// (POST /v1/jobs/{id}/logs) and returns the status.
func (s *server) postLogs(t *testing.T, id, token string, lines ...map[string]any) int {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"token": token, "lines": lines})
	res, err := http.Post(s.url+"/v1/jobs/"+id+"/logs", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	return res.StatusCode
}

// TestJobsLogs: jobs logs prints a job's lines as "<time> <level> <message>
// k=v", --after skips, and --follow prints lines as they come and returns
// once the job ended.
func TestJobsLogs(t *testing.T) {
	s := startServer(t)
	ctx := context.Background()
	id := submitted(t, s.cli(t, "", args("jobs submit --type t --queue logq")).want(t, exitOK))
	leases, err := s.q.Claim(ctx, "logq", 1, "test-worker")
	if err != nil || len(leases) != 1 {
		t.Fatalf("claim: %v", err)
	}
	token := leases[0].Token
	if st := s.postLogs(t, id, token,
		map[string]any{"level": "info", "message": "charging card", "fields": map[string]string{"amount": "42", "note": "two words"}},
		map[string]any{"level": "warn", "message": "slow gateway"},
	); st != http.StatusOK {
		t.Fatalf("POST logs: %d", st)
	}
	if st := s.postLogs(t, id, "not-the-token", map[string]any{"level": "info", "message": "stale"}); st != http.StatusConflict {
		t.Fatalf("POST logs with a stale token: %d, want 409", st)
	}
	r := s.cli(t, "", args("jobs logs "+id)).want(t, exitOK)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	want := []*regexp.Regexp{
		regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z info  charging card amount=42 note="two words"$`),
		regexp.MustCompile(`^\S+ warn  slow gateway$`),
	}
	if len(lines) != len(want) {
		t.Fatalf("jobs logs printed %d lines, want %d:\n%s", len(lines), len(want), r.stdout)
	}
	for i, re := range want {
		if !re.MatchString(lines[i]) {
			t.Fatalf("line %d %q does not match %s", i, lines[i], re)
		}
	}
	var page logPage
	json.Unmarshal([]byte(s.cli(t, "", args("jobs logs "+id+" --json")).want(t, exitOK).stdout), &page)
	if len(page.Lines) != 2 || page.Lines[1].Level != "warn" || page.Lines[0].Attempt != 1 {
		t.Fatalf("--json page: %+v", page)
	}
	r = s.cli(t, "", args("jobs logs "+id+" --after "+jsonNum(page.Lines[0].Seq))).want(t, exitOK, "slow gateway")
	if strings.Contains(r.stdout, "charging") {
		t.Fatalf("--after printed the line it skips:\n%s", r.stdout)
	}
	s.cli(t, "", args("jobs logs")).want(t, exitUsage, "job id")
	s.cli(t, "", args("jobs logs nosuchjob")).want(t, exitNotFound)

	// --follow: a new line shows up while the job runs; the job's end ends it.
	out := &logbuf.Buffer{}
	done := make(chan result, 1)
	go func() { done <- s.cliCtx(ctx, t, "", args("jobs logs "+id+" --follow"), out) }()
	waitFor(t, 10*time.Second, "the first lines", func() bool { return strings.Contains(out.String(), "slow gateway") })
	if st := s.postLogs(t, id, token, map[string]any{"level": "error", "message": "card declined", "fields": map[string]string{"code": "51"}}); st != http.StatusOK {
		t.Fatalf("POST logs: %d", st)
	}
	waitFor(t, 10*time.Second, "the new line", func() bool { return strings.Contains(out.String(), "error card declined code=51") })
	select {
	case <-done:
		t.Fatal("jobs logs --follow returned while the job runs")
	default:
	}
	if _, err := s.q.Complete(ctx, "logq", []queue.Outcome{{ID: id, Token: token, Kind: queue.OutcomeSucceeded, WorkerID: "test-worker"}}); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-done:
		r.want(t, exitOK)
		if n := strings.Count(r.stdout, "card declined"); n != 1 {
			t.Fatalf("the new line printed %d times:\n%s", n, r.stdout)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("jobs logs --follow did not return after the job ended")
	}
}

func jsonNum(n int64) string { return strconv.FormatInt(n, 10) }

// waitFor polls cond until it holds, failing the test after timeout.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
