package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sundialhq/sundial/pkg/queue"
)

// submitted returns the job id "jobs submit" printed.
func submitted(t *testing.T, r result) string {
	t.Helper()
	m := regexp.MustCompile(`(?:submitted job|pending job) (\S+)`).FindStringSubmatch(r.stdout)
	if m == nil {
		t.Fatalf("no job id in:\n%s", r.stdout)
	}
	return m[1]
}

// TestJobsSubmitOptions: the job options' flags reach the job, jobs get
// shows them, debounce says which job took the submit, bad flags are
// refused, and --tag filters jobs list, dead list and jobs bulk.
func TestJobsSubmitOptions(t *testing.T) {
	s := startServer(t)
	r := s.cli(t, "", args("jobs submit --type t --queue opts --tag tenant:acme --tag vip,eu --sequence acct-1 --sequence-on-failure cancel --expires-in 600 --deadline-in 1200")).
		want(t, exitOK, "submitted job", "Tags:", "tenant:acme, vip, eu", "Sequence:", "acct-1 (on failure: cancel)", "Start by:", "Deadline:")
	first := submitted(t, r)
	var j jobView
	json.Unmarshal([]byte(s.cli(t, "", args("jobs get "+first+" --json")).want(t, exitOK).stdout), &j)
	if j.StartBy == nil || time.Until(*j.StartBy) < 500*time.Second || time.Until(*j.StartBy) > 700*time.Second {
		t.Fatalf("start_by %v, want about 10 minutes from now", j.StartBy)
	}
	if j.Deadline == nil || time.Until(*j.Deadline) < 1100*time.Second {
		t.Fatalf("deadline %v, want about 20 minutes from now", j.Deadline)
	}
	// The second job of the sequence waits for the first, and says so.
	second := submitted(t, s.cli(t, "", args("jobs submit --type t --queue opts --sequence acct-1")).want(t, exitOK))
	s.cli(t, "", args("jobs get "+second)).want(t, exitOK, "waiting", "Held back:", first)
	deadline := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	s.cli(t, "", args("jobs submit --type t --queue opts --start-by "+deadline+" --deadline "+deadline)).want(t, exitOK, "Start by:", "Deadline:")

	// Debounce: the second submit of the key lands in the first's job.
	r = s.cli(t, "", []string{"jobs", "submit", "--type", "index", "--queue", "opts", "--payload", `{"n":1}`, "--debounce", "user-7", "--debounce-window", "30"}).want(t, exitOK, "submitted job")
	pending := submitted(t, r)
	s.cli(t, "", []string{"jobs", "submit", "--type", "index", "--queue", "opts", "--payload", `{"n":2}`, "--debounce", "user-7", "--debounce-window", "30"}).
		want(t, exitOK, "debounced into pending job "+pending, "Debounce key:", "user-7", `{"n":2}`)
	s.cli(t, "", args("jobs submit --type t --debounce-window 5")).want(t, exitUsage, "--debounce KEY")
	s.cli(t, "", args("jobs submit --type t --sequence-on-failure cancel")).want(t, exitUsage, "--sequence KEY")
	s.cli(t, "", args("jobs submit --type t --debounce k --debounce-window 5 --delay 3")).want(t, exitError)
	s.cli(t, "", args("jobs submit --type t --tag bad!tag")).want(t, exitError, "tags")

	// --tag filters the live list, the dead letters and bulk actions.
	s.cli(t, "", args("queues pause tagged")).want(t, exitOK)
	for _, tag := range []string{"red", "red", "blue"} {
		s.cli(t, "", args("jobs submit --type t --queue tagged --tag "+tag)).want(t, exitOK)
	}
	s.cli(t, "", args("jobs submit --type t --queue tagged")).want(t, exitOK)
	r = s.cli(t, "", args("jobs list tagged --tag red")).want(t, exitOK, "TAGS", "red")
	if n := strings.Count(r.stdout, "\n") - 1; n != 2 || strings.Contains(r.stdout, "blue") {
		t.Fatalf("jobs list --tag red listed %d jobs, want the 2 red ones:\n%s", n, r.stdout)
	}
	s.cli(t, "", args("jobs bulk cancel tagged --state queued --tag red")).want(t, exitOK, "cancelled 2 jobs of 2 selected in tagged")
	r = s.cli(t, "", args("jobs list tagged")).want(t, exitOK, "blue")
	if n := strings.Count(r.stdout, "\n") - 1; n != 2 {
		t.Fatalf("after the bulk cancel, %d queued jobs, want 2:\n%s", n, r.stdout)
	}
	s.cli(t, "", args("jobs bulk delete tagged --tag red --state dead --type t x")).want(t, exitUsage, "not both")

	ids := s.kill(t, "graveyard", "t", 2, "boom")
	bad := submitted(t, s.cli(t, "", args("jobs submit --type t --queue graveyard --tag bad --max-attempts 1")).want(t, exitOK))
	leases, err := s.q.Claim(context.Background(), "graveyard", 1, "test-worker")
	if err != nil || len(leases) != 1 || leases[0].Job.ID != bad {
		t.Fatalf("claim: %v %v", leases, err)
	}
	if _, err := s.q.Complete(context.Background(), "graveyard", []queue.Outcome{{ID: bad, Token: leases[0].Token, Kind: queue.OutcomeDead, Error: "boom", WorkerID: "test-worker"}}); err != nil {
		t.Fatal(err)
	}
	r = s.cli(t, "", args("dead list graveyard --tag bad")).want(t, exitOK, bad, "bad")
	for _, id := range ids {
		if strings.Contains(r.stdout, id) {
			t.Fatalf("dead list --tag bad lists untagged job %s:\n%s", id, r.stdout)
		}
	}
}

// TestJobsSearch: jobs search sends its filters as the history search's
// parameters (tag, payload.<field>) and prints the page; against a
// recording server, since the history needs its store.
func TestJobsSearch(t *testing.T) {
	t.Parallel()
	var got url.Values
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/jobs" {
			http.NotFound(w, r)
			return
		}
		got = r.URL.Query()
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"jobs": [{"id": "01JS", "queue": "mail", "type": "email.send", "state": "dead", "attempt": 3, "max_attempts": 3,
			"created_at": "2026-12-07T10:00:00Z", "tags": ["tenant:acme", "vip"], "last_error": "smtp 451"}], "next_cursor": "c2"}`))
	}))
	defer ts.Close()
	s := &server{url: ts.URL}
	s.cli(t, "", []string{"jobs", "search", "--queue", "mail", "--tag", "tenant:acme", "--payload", "order=42", "--payload", "region=eu west", "--state", "dead", "--limit", "10"}).
		want(t, exitOK, "01JS", "email.send", "dead", "tenant:acme,vip", "smtp 451", "more: --cursor c2")
	want := url.Values{"queue": {"mail"}, "tag": {"tenant:acme"}, "payload.order": {"42"}, "payload.region": {"eu west"}, "state": {"dead"}, "limit": {"10"}}
	if got.Encode() != want.Encode() {
		t.Fatalf("query %s, want %s", got.Encode(), want.Encode())
	}
	s.cli(t, "", args("jobs search --from 2h")).want(t, exitOK)
	if from, err := time.Parse(time.RFC3339Nano, got.Get("from")); err != nil || time.Since(from) < 119*time.Minute || time.Since(from) > 121*time.Minute {
		t.Fatalf("--from 2h sent from=%q", got.Get("from"))
	}
	s.cli(t, "", args("jobs search --payload order")).want(t, exitUsage, "field=value")
	s.cli(t, "", args("jobs search extra")).want(t, exitUsage)
}
