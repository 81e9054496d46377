package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/sundialhq/sundial/internal/logbuf"
	"github.com/sundialhq/sundial/pkg/queue"
	"github.com/sundialhq/sundial/pkg/queue/queuetest"
)

// TestWatchAndResult follows a job through "sundial watch" (one line per
// event) and reads its result with "jobs get".
func TestWatchAndResult(t *testing.T) {
	s := startServer(t)
	ctx, cancel := context.WithCancel(context.Background())
	out := &logbuf.Buffer{}
	done := make(chan result, 1)
	go func() { done <- s.cliCtx(ctx, t, "", args("watch --queue echo"), out) }()

	// The stream only sends what happens after the client connected:
	// submit until the first event shows, then run the job.
	var id string
	queuetest.Eventually(t, 10*time.Second, "a submitted line", func() bool {
		if strings.Contains(out.String(), "submitted") {
			return true
		}
		r := s.cli(t, "", args("jobs submit --type sundial.echo --queue echo --payload {\"hello\":\"world\"}")).want(t, exitOK)
		id = strings.Fields(strings.SplitN(r.stdout, "submitted job ", 2)[1])[0]
		time.Sleep(50 * time.Millisecond)
		return false
	})
	bg := context.Background()
	for {
		leases, err := s.q.Claim(bg, "echo", 1, "test-worker")
		if err != nil {
			t.Fatal(err)
		}
		if len(leases) == 0 {
			break
		}
		l := leases[0]
		if _, err := s.q.Complete(bg, "echo", []queue.Outcome{{ID: l.Job.ID, Token: l.Token, Kind: queue.OutcomeSucceeded, Result: l.Job.Payload, WorkerID: "test-worker"}}); err != nil {
			t.Fatal(err)
		}
	}
	queuetest.Eventually(t, 10*time.Second, "the succeeded line of "+id, func() bool {
		return strings.Contains(out.String(), id+"  sundial.echo  succeeded")
	})
	cancel()
	r := <-done
	r.want(t, exitOK, id+"  sundial.echo  started  attempt=1  worker=test-worker")
	line := regexp.MustCompile(`(?m)^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z  echo  ` + id + `  sundial\.echo  submitted$`)
	if !line.MatchString(r.stdout) {
		t.Fatalf("no submitted line in the expected form:\n%s", r.stdout)
	}

	s.cli(t, "", args("jobs get "+id)).want(t, exitOK, "State:", "succeeded", "Result:", `{"hello":"world"}`, "Worker:", "test-worker")
}

// The API sends times in UTC; a schedule's are shown in its time zone.
func TestScheduleTimesInTheirZone(t *testing.T) {
	s := startServer(t)
	r := s.cli(t, "", []string{"schedules", "put", "nightly", "--cron", "0 3 * * *", "--tz", "Europe/Berlin", "--type", "report.build"}).want(t, exitOK)
	if !regexp.MustCompile(`Next run:\s+\d{4}-\d\d-\d\d 03:00:00 \+0[12]:00`).MatchString(r.stdout) {
		t.Fatalf("next run not in Berlin time:\n%s", r.stdout)
	}
	r = s.cli(t, "", args("schedules get nightly --json")).want(t, exitOK)
	if !regexp.MustCompile(`"next_run_at": "\d{4}-\d\d-\d\dT0[12]:00:00\.000Z"`).MatchString(r.stdout) {
		t.Fatalf("the API's next_run_at is not in UTC with milliseconds:\n%s", r.stdout)
	}
}

// A lost stream is dialled again: each connection of this fake server
// sends one event and closes as a restarting API would.
func TestWatchReconnects(t *testing.T) {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		i := n.Add(1)
		msg := fmt.Sprintf(`{"kind":"event","event":{"at":"2026-11-23T21:00:00.000Z","queue":"q","job_id":"J%d","type":"t","event":"queued"}}`, i)
		_ = c.Write(r.Context(), websocket.MessageText, []byte(msg))
		c.Close(websocket.StatusGoingAway, "restart")
	}))
	defer srv.Close()
	s := &server{url: srv.URL}
	ctx, cancel := context.WithCancel(context.Background())
	out := &logbuf.Buffer{}
	done := make(chan result, 1)
	go func() { done <- s.cliCtx(ctx, t, "", args("watch"), out) }()
	queuetest.Eventually(t, 10*time.Second, "events of two connections", func() bool {
		return strings.Contains(out.String(), "J1  t  queued") && strings.Contains(out.String(), "J2  t  queued")
	})
	cancel()
	(<-done).want(t, exitOK, "stream lost", "reconnecting")
}
