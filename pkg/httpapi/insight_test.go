package httpapi

import (
	"context"
	"github.com/sundialhq/sundial/internal/outbox"
	"net/http"
	"testing"
	"time"

	"github.com/sundialhq/sundial/pkg/queue"
)

func TestThroughput(t *testing.T) {
	a := start(t)
	var empty throughputResult
	a.do("GET", "/v1/throughput", nil).decode(t, http.StatusOK, &empty)
	if empty.Window != "1h" || empty.Queues == nil || len(empty.Queues) != 0 {
		t.Fatalf("no queues: %+v", empty)
	}

	a.bury(t, "mail", 2)
	j := a.submit(t, map[string]any{"type": "ok", "queue": "mail"})
	leases, err := a.q.Claim(context.Background(), "mail", 1, "w1")
	if err != nil || len(leases) != 1 {
		t.Fatalf("claim: %v", err)
	}
	if _, err := a.q.Complete(context.Background(), "mail", []queue.Outcome{{ID: j.ID, Token: leases[0].Token, Kind: queue.OutcomeSucceeded, WorkerID: "w1"}}); err != nil {
		t.Fatal(err)
	}
	a.submit(t, map[string]any{"type": "ok", "queue": "idle"})

	var got throughputResult
	a.do("GET", "/v1/throughput?window=5m", nil).decode(t, http.StatusOK, &got)
	if got.Window != "5m" || len(got.Queues) != 2 {
		t.Fatalf("got %+v", got)
	}
	for _, q := range got.Queues {
		if len(q.Minutes) != 5 {
			t.Fatalf("%s: %d minutes, want 5", q.Queue, len(q.Minutes))
		}
		last := q.Minutes[len(q.Minutes)-1]
		if time.Since(last.Minute) > 2*time.Minute || !q.Minutes[0].Minute.Before(last.Minute) {
			t.Errorf("%s: minutes %v … %v", q.Queue, q.Minutes[0].Minute, last.Minute)
		}
		var s, f, d int64
		for _, m := range q.Minutes {
			s, f, d = s+m.Succeeded, f+m.Failed, d+m.Dead
		}
		want := [3]int64{}
		if q.Queue == "mail" {
			want = [3]int64{1, 2, 2}
		}
		if [3]int64{s, f, d} != want {
			t.Errorf("%s: succeeded, failed, dead = %d %d %d, want %v", q.Queue, s, f, d, want)
		}
	}

	var one throughputResult
	a.do("GET", "/v1/throughput?window=24h&queue=mail", nil).decode(t, http.StatusOK, &one)
	if len(one.Queues) != 1 || one.Queues[0].Queue != "mail" || len(one.Queues[0].Minutes) != 24*60 {
		t.Fatalf("24h of mail: %d queues", len(one.Queues))
	}
	a.do("GET", "/v1/throughput?window=2h", nil).wantError(t, http.StatusBadRequest, codeInvalidArgument, "window")
	a.do("GET", "/v1/throughput?queue=Bad!", nil).wantError(t, http.StatusBadRequest, codeInvalidArgument, "queue")
	a.do("GET", "/v1/throughput?windw=5m", nil).wantError(t, http.StatusBadRequest, codeInvalidArgument, "windw")
}

func TestHistoryBacklog(t *testing.T) {
	a := start(t)
	for range 3 {
		a.submit(t, map[string]any{"type": "ok", "queue": "mail"})
	}
	var b struct {
		At         time.Time           `json:"at"`
		Events     int64               `json:"events"`
		LagSeconds float64             `json:"lag_seconds"`
		Queues     []queueHistoryState `json:"queues"`
	}
	a.do("GET", "/v1/history/backlog", nil).decode(t, http.StatusOK, &b)
	// No writer has read anything: every event of the queue waits.
	if b.Events < 3 || len(b.Queues) != 1 || b.Queues[0].Queue != "mail" || b.Queues[0].Events != b.Events {
		t.Fatalf("backlog %+v", b)
	}
	if b.LagSeconds < 0 || b.LagSeconds > 60 || time.Since(b.At) > time.Minute {
		t.Errorf("lag %v", b.LagSeconds)
	}
	a.do("GET", "/v1/history/backlog?x=1", nil).wantError(t, http.StatusBadRequest, codeInvalidArgument, "x")
}

// TestOutboxStatus: without a relay the list is empty (not null); a relay
// that wrote its status is listed, and stops counting as running once it
// no longer writes. (sundialpg's TestPollerKilledAtEachStep shows a real
// poller's relay through the API binary.)
func TestOutboxStatus(t *testing.T) {
	a := start(t)
	var v outboxView
	a.do("GET", "/v1/outbox", nil).decode(t, http.StatusOK, &v)
	if v.Relays == nil || len(v.Relays) != 0 {
		t.Fatalf("no relay: %+v", v)
	}
	rdb := a.redis.Client()
	old := time.Now().Add(-time.Minute).UnixMilli()
	if err := rdb.HSet(t.Context(), outbox.StatusKey("mongodb"), "relay_id", "r1", "lag_seconds", "1.500",
		"at_ms", old, "relayed", 42).Err(); err != nil {
		t.Fatal(err)
	}
	a.do("GET", "/v1/outbox", nil).decode(t, http.StatusOK, &v)
	if len(v.Relays) != 1 || v.Relays[0] != (outboxRelay{Store: "mongodb", RelayID: "r1", LagSeconds: 1.5, Relayed: 42,
		At: msTime(time.UnixMilli(old).UTC()), Running: false}) {
		t.Fatalf("a stopped relay: %+v", v)
	}
	a.do("GET", "/v1/outbox?x=1", nil).wantError(t, http.StatusBadRequest, codeInvalidArgument, "x")
}

func TestSchedulePreview(t *testing.T) {
	a := start(t)
	var p schedulePreview
	a.do("POST", "/v1/schedules/preview", map[string]any{"cron": "0 3 * * *", "timezone": "Europe/Berlin"}).decode(t, http.StatusOK, &p)
	if len(p.Upcoming) != 5 {
		t.Fatalf("upcoming %v", p.Upcoming)
	}
	berlin, _ := time.LoadLocation("Europe/Berlin")
	for i, u := range p.Upcoming {
		if l := u.In(berlin); l.Hour() != 3 || l.Minute() != 0 || !u.After(time.Now()) {
			t.Errorf("upcoming[%d] = %v", i, l)
		}
		if i > 0 && !u.After(p.Upcoming[i-1]) {
			t.Errorf("not increasing: %v", p.Upcoming)
		}
	}
	a.do("POST", "/v1/schedules/preview", map[string]any{"every_seconds": 90}).decode(t, http.StatusOK, &p)
	if len(p.Upcoming) != 5 || p.Upcoming[1].Sub(p.Upcoming[0]) != 90*time.Second || time.Until(p.Upcoming[0]) > 91*time.Second {
		t.Fatalf("every 90 s: %v", p.Upcoming)
	}

	for _, tc := range []struct {
		body  any
		field string
	}{
		{map[string]any{"cron": "61 * * * *"}, "cron"},
		{map[string]any{}, "cron"},
		{map[string]any{"cron": "@daily", "every_seconds": 5}, "cron"},
		{map[string]any{"every_seconds": 0}, "every_seconds"},
		{map[string]any{"cron": "@daily", "timezone": "Mars/Olympus"}, "timezone"},
		{map[string]any{"cron": "@daily", "crn": "x"}, "crn"},
	} {
		a.do("POST", "/v1/schedules/preview", tc.body).wantError(t, http.StatusBadRequest, codeInvalidArgument, tc.field)
	}
	// Nothing was stored, and a schedule may still be called "preview".
	var list scheduleList
	a.do("GET", "/v1/schedules", nil).decode(t, http.StatusOK, &list)
	if len(list.Schedules) != 0 {
		t.Fatalf("preview stored something: %+v", list)
	}
	a.do("PUT", "/v1/schedules/preview", map[string]any{"every_seconds": 60, "job": map[string]any{"type": "ok"}}).decode(t, http.StatusCreated, nil)
	a.do("POST", "/v1/schedules/preview/trigger", nil).decode(t, http.StatusCreated, nil)
}
