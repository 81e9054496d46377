package httpapi

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sundialhq/sundial/internal/mongotest"
	"github.com/sundialhq/sundial/pkg/history"
	"github.com/sundialhq/sundial/pkg/job"
	"github.com/sundialhq/sundial/pkg/queue"
)

// team is one side of the isolation test: its key and what it made.
type team struct {
	name, key, queue string
	job, dead, batch string // ids
	schedule, limit  string
}

// setupTeams runs an API with two teams' keys (admin, each limited to its
// queues) and an unlimited key over one Redis and a real history store
// (FerretDB, fed by a history writer), and gives each team a job, a dead
// job, a batch, a schedule and a limit in its own queue.
func setupTeams(t *testing.T) (*testAPI, *team, *team) {
	t.Helper()
	_, db := mongotest.Client(t)
	store := history.NewStore(db, history.StoreOptions{Logger: discardLogger()})
	a := start(t, func(c *Config) {
		c.APIKeys = []string{"billing-secret:admin@billing-*", "ops-secret:admin@ops-*|shared-ops", "root-secret"}
		c.History = store
	})
	ctx, cancel := context.WithCancel(context.Background())
	w := history.NewWriter(a.q, store, history.WriterConfig{Consumer: "t", DiscoverInterval: 20 * time.Millisecond, Linger: time.Millisecond, Logger: discardLogger()})
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	billing := &team{name: "billing", key: "billing-secret", queue: "billing-eu", schedule: "billing-nightly", limit: "billing-cap"}
	ops := &team{name: "ops", key: "ops-secret", queue: "ops-main", schedule: "ops-nightly", limit: "ops-cap"}
	for _, tm := range []*team{billing, ops} {
		var j job.Job
		a.as(tm.key, "POST", "/v1/jobs", map[string]any{"queue": tm.queue, "type": tm.name + ".work", "delay_seconds": 3600}).decode(t, http.StatusCreated, &j)
		tm.job = j.ID
		var d job.Job
		a.as(tm.key, "POST", "/v1/jobs", map[string]any{"queue": tm.queue, "type": tm.name + ".doomed"}).decode(t, http.StatusCreated, &d)
		leases, err := a.q.Claim(ctx, tm.queue, 1, "w1")
		if err != nil || len(leases) != 1 {
			t.Fatalf("claim: %v", err)
		}
		if _, err := a.q.Complete(ctx, tm.queue, []queue.Outcome{{ID: d.ID, Token: leases[0].Token, Kind: queue.OutcomeDead, Error: "boom", WorkerID: "w1"}}); err != nil {
			t.Fatal(err)
		}
		tm.dead = d.ID
		var b struct {
			Batch struct {
				ID string `json:"id"`
			} `json:"batch"`
		}
		a.as(tm.key, "POST", "/v1/batches", map[string]any{"jobs": []map[string]any{{"queue": tm.queue, "type": tm.name + ".part", "delay_seconds": 3600}}}).decode(t, http.StatusCreated, &b)
		tm.batch = b.Batch.ID
		a.as(tm.key, "PUT", "/v1/schedules/"+tm.schedule, map[string]any{"every_seconds": 3600, "job": map[string]any{"type": "x", "queue": tm.queue}}).decode(t, http.StatusCreated, nil)
		a.as(tm.key, "PUT", "/v1/queues/"+tm.queue+"/limits/"+tm.limit, map[string]any{"concurrency": 5}).decode(t, http.StatusCreated, nil)
	}
	// A worker serving both teams' queues, running a job of each.
	if err := a.q.Heartbeat(ctx, queue.WorkerInfo{ID: "shared-worker", Hostname: "h", PID: 1, Queues: []string{billing.queue, ops.queue}, Concurrency: 2,
		ActiveJobs: []string{billing.job, ops.job}, StartedAt: time.Now(), LastSeenAt: time.Now()}, time.Minute); err != nil {
		t.Fatal(err)
	}
	// The history has every job.
	deadline := time.Now().Add(20 * time.Second)
	for _, id := range []string{billing.job, billing.dead, ops.job, ops.dead} {
		for {
			if _, err := store.Job(ctx, id); err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("job %s never reached the history", id)
			}
			time.Sleep(20 * time.Millisecond) // polling a condition under a deadline
		}
	}
	return a, billing, ops
}

// TestTeamsKeptApart: a key limited to its queues finds nothing of another
// team's — every route family, both directions: by-id routes answer 404 (as
// for what does not exist), submits into the other team's queues 403,
// lists leave the other team out, and the stream carries none of its
// events or counts. The same routes work on the team's own things, and an
// unlimited key sees both.
func TestTeamsKeptApart(t *testing.T) {
	a, billing, ops := setupTeams(t)
	type row struct {
		method, path string
		body         func(own *team) any
		foreign, own int // statuses: acting on the other team's, on its own
	}
	id := func(tm *team) string { return tm.job }
	q := func(tm *team) string { return tm.queue }
	rows := []row{
		{"GET", "/v1/jobs/{job}", nil, 404, 200},
		{"GET", "/v1/jobs/{job}/events", nil, 404, 200},
		{"GET", "/v1/jobs/{job}/graph", nil, 404, 200},
		{"POST", "/v1/jobs/{job}/signals/go", nil, 404, 200},
		{"POST", "/v1/jobs/{job}/heartbeat", func(*team) any { return map[string]any{"token": "1", "worker_id": "w"} }, 404, 409},
		{"POST", "/v1/jobs/{dead}/retry", nil, 404, 200},
		{"POST", "/v1/jobs/{job}/cancel", nil, 404, 200},
		{"GET", "/v1/queues/{queue}", nil, 404, 200},
		{"GET", "/v1/queues/{queue}/jobs?state=dead", nil, 404, 200},
		{"GET", "/v1/queues/{queue}/dead", nil, 404, 200},
		{"GET", "/v1/queues/{queue}/limits", nil, 404, 200},
		{"GET", "/v1/queues/{queue}/limits/{limit}", nil, 404, 200},
		{"GET", "/v1/queues/{queue}/uniqueness", nil, 404, 200},
		{"POST", "/v1/queues/{queue}/jobs/bulk", func(*team) any { return map[string]any{"action": "retry", "filter": map[string]any{"state": "dead"}} }, 404, 200},
		{"POST", "/v1/queues/{queue}/dead/retry", func(*team) any { return map[string]any{"ids": []string{"nope"}} }, 404, 200},
		{"POST", "/v1/queues/{queue}/pause", nil, 404, 200},
		{"POST", "/v1/queues/{queue}/resume", nil, 404, 200},
		{"POST", "/v1/queues/{queue}/claim", func(*team) any { return map[string]any{"worker_id": "w", "max": 1} }, 404, 200},
		{"DELETE", "/v1/queues/{queue}", nil, 404, 409},
		{"GET", "/v1/schedules/{schedule}", nil, 404, 200},
		{"PATCH", "/v1/schedules/{schedule}", func(*team) any { return map[string]any{"enabled": false} }, 404, 200},
		{"POST", "/v1/schedules/{schedule}/trigger", nil, 404, 201},
		{"GET", "/v1/batches/{batch}", nil, 404, 200},
		{"GET", "/v1/batches/{batch}/jobs", nil, 404, 200},
		{"GET", "/v1/batches/{batch}/results", nil, 404, 200},
		{"POST", "/v1/batches/{batch}/retry", nil, 404, 200},
		{"POST", "/v1/jobs", func(tm *team) any { return map[string]any{"queue": tm.queue, "type": "x"} }, 403, 201},
		{"POST", "/v1/jobs/batch", func(tm *team) any {
			return map[string]any{"jobs": []any{map[string]any{"queue": tm.queue, "type": "x"}}}
		}, 403, 201},
		{"POST", "/v1/batches", func(tm *team) any {
			return map[string]any{"jobs": []any{map[string]any{"queue": tm.queue, "type": "x"}}}
		}, 403, 201},
		{"POST", "/v1/workflows", func(tm *team) any {
			return map[string]any{"steps": []any{map[string]any{"name": "a", "job": map[string]any{"queue": tm.queue, "type": "x"}}}}
		}, 403, 201},
		{"PUT", "/v1/schedules/{new}", func(tm *team) any {
			return map[string]any{"every_seconds": 60, "job": map[string]any{"type": "x", "queue": tm.queue}}
		}, 403, 201},
		{"POST", "/v1/signals", func(tm *team) any { return map[string]any{"queue": tm.queue, "key": "order-1", "name": "paid"} }, 403, 202},
		{"POST", "/v1/claim", func(tm *team) any { return map[string]any{"worker_id": "w", "queues": []string{tm.queue}} }, 403, 200},
	}
	fill := func(path string, tm, caller *team) string {
		return strings.NewReplacer("{job}", id(tm), "{dead}", tm.dead, "{queue}", q(tm), "{schedule}", tm.schedule,
			"{batch}", tm.batch, "{limit}", tm.limit, "{new}", "new-"+caller.name+"-"+tm.name).Replace(path)
	}
	for _, dir := range [][2]*team{{billing, ops}, {ops, billing}} {
		me, other := dir[0], dir[1]
		for _, r := range rows {
			// On the other team's things first (nothing changes), then on its own.
			for _, target := range []*team{other, me} {
				var body any
				if r.body != nil {
					body = r.body(target)
				}
				path := fill(r.path, target, me)
				res := a.as(me.key, r.method, path, body)
				want := r.own
				if target == other {
					want = r.foreign
				}
				if res.status != want {
					t.Errorf("%s key, %s %s on %s's: status %d, want %d: %s", me.name, r.method, r.path, target.name, res.status, want, res.body)
				}
				if target == other {
					// Only what the caller named itself may come back (in a
					// 404's or 403's message).
					for _, leak := range []string{other.queue, other.job, other.dead, other.batch, other.schedule, other.limit} {
						if strings.Contains(string(res.body), leak) && !strings.Contains(path, leak) && res.status != 403 {
							t.Errorf("%s key, %s %s: the answer names %q of %s:\n%s", me.name, r.method, r.path, leak, other.name, res.body)
						}
					}
				}
			}
		}
		// Lists: the team's own things, none of the other's.
		for _, path := range []string{"/v1/queues", "/v1/throughput?window=5m", "/v1/history/backlog", "/v1/workers", "/v1/schedules",
			"/v1/jobs", "/v1/jobs?queue=" + other.queue, "/v1/jobs?type=" + other.name + ".work", "/v1/queues/" + me.queue + "/jobs?state=scheduled"} {
			res := a.as(me.key, "GET", path, nil)
			if res.status != 200 {
				t.Errorf("%s key, GET %s: %d %s", me.name, path, res.status, res.body)
				continue
			}
			for _, leak := range []string{other.queue, other.job, other.dead, other.schedule} {
				if strings.Contains(string(res.body), leak) {
					t.Errorf("%s key, GET %s names %q of %s:\n%s", me.name, path, leak, other.name, res.body)
				}
			}
		}
		var ws workerList
		a.as(me.key, "GET", "/v1/workers", nil).decode(t, 200, &ws)
		shared := 0
		for _, w := range ws.Workers {
			if w.ID != "shared-worker" {
				continue
			}
			shared++
			if len(w.ActiveJobs) != 1 || w.ActiveJobs[0] != me.job || len(w.Queues) != 1 || w.Queues[0] != me.queue {
				t.Errorf("%s key, the shared worker: %+v", me.name, w)
			}
		}
		if shared != 1 {
			t.Errorf("%s key, workers: %+v", me.name, ws.Workers)
		}
		var ql queueList
		a.as(me.key, "GET", "/v1/queues", nil).decode(t, 200, &ql)
		if len(ql.Queues) != 1 || ql.Queues[0].Name != me.queue {
			t.Errorf("%s key, queues: %+v", me.name, ql.Queues)
		}
	}
	// The unlimited key sees both teams.
	res := a.as("root-secret", "GET", "/v1/queues", nil)
	for _, tm := range []*team{billing, ops} {
		if !strings.Contains(string(res.body), tm.queue) {
			t.Errorf("root key does not see %s", tm.queue)
		}
		a.as("root-secret", "GET", "/v1/jobs/"+tm.dead, nil).decode(t, 200, nil)
	}
}

// TestTeamsStream: the stream of a limited key carries its team's events,
// bulk progress and counts only, whatever it asks for.
func TestTeamsStream(t *testing.T) {
	a := start(t, func(c *Config) { c.APIKeys = []string{"billing-secret:admin@billing-*", "root-secret"} })
	a.waitStream(t)
	for _, query := range []string{"", "queue=ops-main"} {
		conn := a.mustDial(t, query, "Authorization", "Bearer billing-secret")
		a.as("root-secret", "POST", "/v1/jobs", map[string]any{"queue": "ops-main", "type": "ops.secret"}).decode(t, http.StatusCreated, nil)
		var mine job.Job
		a.as("root-secret", "POST", "/v1/jobs", map[string]any{"queue": "billing-eu", "type": "billing.ok"}).decode(t, http.StatusCreated, &mine)
		if query != "" {
			// Asking for the other team's queue gets nothing of it: a
			// stats message is the next thing to arrive, with no ops queue.
			m, err := read(t, conn)
			for err == nil && m.Kind != "stats" {
				if m.Kind == "event" {
					t.Fatalf("stream ?%s sent %+v", query, m.Event)
				}
				m, err = read(t, conn)
			}
			if err != nil {
				t.Fatal(err)
			}
			continue
		}
		seenStats := false
		for _, e := range events(t, conn, mine.ID, "submitted") {
			if e.Queue != "billing-eu" {
				t.Errorf("stream sent an event of %s: %+v", e.Queue, e)
			}
		}
		// Stats: only billing's queue, counted workers of billing only.
		for !seenStats {
			m, err := read(t, conn)
			if err != nil {
				t.Fatal(err)
			}
			if m.Kind != "stats" {
				if m.Event != nil && m.Event.Queue != "billing-eu" {
					t.Errorf("stream sent an event of %s", m.Event.Queue)
				}
				continue
			}
			for _, qs := range m.Queues {
				if qs.Name != "billing-eu" {
					t.Errorf("stats name queue %s", qs.Name)
				}
			}
			seenStats = len(m.Queues) == 1
		}
	}
}
