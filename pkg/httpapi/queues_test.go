package httpapi

import (
	"context"
	"net/http"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sundialhq/sundial/pkg/job"
	"github.com/sundialhq/sundial/pkg/queue"
)

// bury submits n jobs to q and makes them dead (claim, then a fatal
// outcome), oldest first; it returns their ids.
func (a *testAPI) bury(t *testing.T, q string, n int) []string {
	t.Helper()
	ctx := context.Background()
	var ids []string
	for range n {
		j := a.submit(t, map[string]any{"type": "doomed", "queue": q})
		leases, err := a.q.Claim(ctx, q, 1, "w1")
		if err != nil || len(leases) != 1 {
			t.Fatalf("claim: %v", err)
		}
		st, err := a.q.Complete(ctx, q, []queue.Outcome{{ID: j.ID, Token: leases[0].Token, Kind: queue.OutcomeDead, Error: "boom", WorkerID: "w1"}})
		if err != nil || st[0] != queue.StatusDead {
			t.Fatalf("complete: %v %v", st, err)
		}
		ids = append(ids, j.ID)
	}
	return ids
}

func TestQueues(t *testing.T) {
	a := start(t)
	var list queueList
	a.do("GET", "/v1/queues", nil).decode(t, http.StatusOK, &list)
	if list.Queues == nil || len(list.Queues) != 0 {
		t.Fatalf("no queues yet should be []: %+v", list)
	}
	a.submit(t, map[string]any{"type": "a", "priority": "high"})
	a.submit(t, map[string]any{"type": "a", "queue": "mail", "delay_seconds": 60})
	a.do("GET", "/v1/queues", nil).decode(t, http.StatusOK, &list)
	if len(list.Queues) != 2 || list.Queues[0].Name != "default" || list.Queues[0].Queued["high"] != 1 || list.Queues[1].Scheduled != 1 {
		t.Fatalf("%+v", list)
	}
	var one queue.QueueStats
	a.do("GET", "/v1/queues/mail", nil).decode(t, http.StatusOK, &one)
	if one.Name != "mail" || one.Scheduled != 1 {
		t.Fatalf("%+v", one)
	}
	a.do("GET", "/v1/queues/nope", nil).wantError(t, http.StatusNotFound, codeNotFound, "")
	a.do("GET", "/v1/queues/Bad%20Name", nil).wantError(t, http.StatusBadRequest, codeInvalidArgument, "queue")
}

func TestPauseResume(t *testing.T) {
	a := start(t)
	ctx := context.Background()
	// Pausing a queue nobody used yet creates it, paused.
	var st queue.QueueStats
	a.do("POST", "/v1/queues/fresh/pause", nil).decode(t, http.StatusOK, &st)
	if !st.Paused || st.Name != "fresh" {
		t.Fatalf("%+v", st)
	}
	a.submit(t, map[string]any{"type": "a", "queue": "fresh"})
	if leases, err := a.q.Claim(ctx, "fresh", 1, "w"); err != nil || len(leases) != 0 {
		t.Fatalf("claimed from a paused queue: %v %v", leases, err)
	}
	a.do("POST", "/v1/queues/fresh/resume", "{}").decode(t, http.StatusOK, &st)
	if st.Paused {
		t.Fatal("still paused")
	}
	if leases, err := a.q.Claim(ctx, "fresh", 1, "w"); err != nil || len(leases) != 1 {
		t.Fatalf("no claim after resume: %v %v", leases, err)
	}
	a.do("POST", "/v1/queues/never/resume", nil).wantError(t, http.StatusNotFound, codeNotFound, "")
	a.do("POST", "/v1/queues/BAD/pause", nil).wantError(t, http.StatusBadRequest, codeInvalidArgument, "queue")
	a.do("POST", "/v1/queues/fresh/pause", `{"why":"x"}`).wantError(t, http.StatusBadRequest, codeInvalidArgument, "why")
}

func TestDeadLetters(t *testing.T) {
	a := start(t)
	ids := a.bury(t, "mail", 5)
	// Newest first, paged.
	var page searchResult
	a.do("GET", "/v1/queues/mail/dead?limit=2", nil).decode(t, http.StatusOK, &page)
	var seen []string
	for {
		for _, j := range page.Jobs {
			if j.State != job.Dead || j.LastError != "boom" {
				t.Fatalf("%+v", j)
			}
			seen = append(seen, j.ID)
		}
		if page.NextCursor == "" {
			break
		}
		a.do("GET", "/v1/queues/mail/dead?limit=2&cursor="+page.NextCursor, nil).decode(t, http.StatusOK, &page)
	}
	want := slices.Clone(ids)
	slices.Reverse(want)
	if !slices.Equal(seen, want) {
		t.Fatalf("dead letters %v, want newest first %v", seen, want)
	}
	a.do("GET", "/v1/queues/mail/dead?cursor=garbage", nil).wantError(t, http.StatusBadRequest, codeInvalidArgument, "cursor")
	a.do("GET", "/v1/queues/mail/dead?limit=1000", nil).wantError(t, http.StatusBadRequest, codeInvalidArgument, "limit")
	a.do("GET", "/v1/queues/none/dead", nil).wantError(t, http.StatusNotFound, codeNotFound, "")

	// Retry two by id, purge one by id, then retry and purge the rest.
	var retried retriedCount
	a.do("POST", "/v1/queues/mail/dead/retry", map[string]any{"ids": ids[:2]}).decode(t, http.StatusOK, &retried)
	if retried.Retried != 2 {
		t.Fatalf("retried %d", retried.Retried)
	}
	var deleted deletedCount
	a.do("DELETE", "/v1/queues/mail/dead", map[string]any{"ids": ids[2:3]}).decode(t, http.StatusOK, &deleted)
	if deleted.Deleted != 1 {
		t.Fatalf("deleted %d", deleted.Deleted)
	}
	a.do("GET", "/v1/jobs/"+ids[2], nil).wantError(t, http.StatusNotFound, codeNotFound, "")
	a.do("POST", "/v1/queues/mail/dead/retry", map[string]any{"ids": []string{}}).wantError(t, http.StatusBadRequest, codeInvalidArgument, "ids")
	a.do("POST", "/v1/queues/mail/dead/retry", `{"ids":["ok","a b"]}`).wantError(t, http.StatusBadRequest, codeInvalidArgument, "ids[1]")
	a.do("POST", "/v1/queues/mail/dead/retry", `{"id":["x"]}`).wantError(t, http.StatusBadRequest, codeInvalidArgument, "id")
	a.do("POST", "/v1/queues/mail/dead/retry", nil).decode(t, http.StatusOK, &retried)
	if retried.Retried != 2 {
		t.Fatalf("retry all: %d", retried.Retried)
	}
	a.bury(t, "news", 2)
	a.do("DELETE", "/v1/queues/news/dead", nil).decode(t, http.StatusOK, &deleted)
	if deleted.Deleted != 2 {
		t.Fatalf("purge all: %d", deleted.Deleted)
	}
	for _, st := range a.stats(t) {
		if st.Dead != 0 {
			t.Fatalf("%+v", st)
		}
	}
}

func TestWorkers(t *testing.T) {
	a := start(t)
	var list workerList
	a.do("GET", "/v1/workers", nil).decode(t, http.StatusOK, &list)
	if list.Workers == nil || len(list.Workers) != 0 {
		t.Fatalf("%+v", list)
	}
	w := queue.WorkerInfo{ID: "host-1-1", Hostname: "host", PID: 1, Queues: []string{"default"}, Concurrency: 10, ActiveJobs: []string{}, StartedAt: time.Now().UTC()}
	if err := a.q.Heartbeat(context.Background(), w, time.Minute); err != nil {
		t.Fatal(err)
	}
	a.do("GET", "/v1/workers", nil).decode(t, http.StatusOK, &list)
	if len(list.Workers) != 1 || list.Workers[0].ID != w.ID || list.Workers[0].Concurrency != 10 {
		t.Fatalf("%+v", list)
	}
}

// GET /v1/workers shows each worker's metrics_url, and
// GET /v1/workers/metrics-targets lists the workers that have one as a
// Prometheus HTTP service-discovery list.
func TestMetricsTargets(t *testing.T) {
	a := start(t)
	res := a.do("GET", "/v1/workers/metrics-targets", nil)
	if res.status != http.StatusOK || strings.TrimSpace(string(res.body)) != "[]" {
		t.Fatalf("no workers: %d %s, want 200 []", res.status, res.body)
	}
	if ct := res.header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Fatalf("Content-Type %q: Prometheus takes application/json only", ct)
	}
	now := time.Now().UTC()
	for _, w := range []queue.WorkerInfo{
		{ID: "w1", Hostname: "h1", MetricsURL: "http://127.0.0.1:9092/metrics"},
		{ID: "w2", Hostname: "h1", MetricsURL: "http://127.0.0.1:9093/metrics"},
		{ID: "w3", Hostname: "h2", MetricsURL: "http://h2:9100/ops/metrics"},
		{ID: "http-1", Hostname: queue.HTTPWorkerHost + "10.0.0.1"}, // serves no metrics
	} {
		w.Queues, w.ActiveJobs, w.StartedAt = []string{"default"}, []string{}, now
		if err := a.q.Heartbeat(context.Background(), w, time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	var list workerList
	a.do("GET", "/v1/workers", nil).decode(t, http.StatusOK, &list)
	urls := map[string]string{}
	for _, w := range list.Workers {
		urls[w.ID] = w.MetricsURL
	}
	if urls["w2"] != "http://127.0.0.1:9093/metrics" || urls["http-1"] != "" {
		t.Fatalf("metrics_url by worker = %v", urls)
	}
	var got []metricsTarget
	a.do("GET", "/v1/workers/metrics-targets", nil).decode(t, http.StatusOK, &got)
	slices.SortFunc(got, func(x, y metricsTarget) int { return strings.Compare(x.Labels["worker_id"], y.Labels["worker_id"]) })
	want := []metricsTarget{
		{Targets: []string{"127.0.0.1:9092"}, Labels: map[string]string{"worker_id": "w1", "hostname": "h1"}},
		{Targets: []string{"127.0.0.1:9093"}, Labels: map[string]string{"worker_id": "w2", "hostname": "h1"}},
		{Targets: []string{"h2:9100"}, Labels: map[string]string{"worker_id": "w3", "hostname": "h2", "__metrics_path__": "/ops/metrics"}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("targets = %+v, want %+v", got, want)
	}
	a.do("GET", "/v1/workers/metrics-targets?x=1", nil).wantError(t, http.StatusBadRequest, codeInvalidArgument, "x")
}

// The running API is a registered reader of the storage format, and
// GET /v1/storage shows it with the marker, which a new Redis has at the
// newest format at once: no reader lacks it. (The marker moving is
// queue.TestMarkerMovingStopsARegisteredProcess and e2e's
// TestStorageFormatGate.)
func TestStorage(t *testing.T) {
	a := start(t)
	var st storageView
	a.do("GET", "/v1/storage", nil).decode(t, http.StatusOK, &st)
	if st.Format != strconv.Itoa(queue.WriteFormat) || st.Writes != queue.WriteFormat || !slices.Equal(st.Reads, queue.ReadFormats()) {
		t.Fatalf("%+v", st)
	}
	if len(st.Readers) != 1 || st.Readers[0].Role != "api" || st.Readers[0].PID != os.Getpid() {
		t.Fatalf("readers = %+v, want this API", st.Readers)
	}
	if st.Unregistered == nil || len(st.Unregistered) != 0 {
		t.Fatalf("unregistered workers = %#v, want []", st.Unregistered)
	}
	// A new Redis: writable at once, nothing holds it back.
	if st.Newest != queue.WriteFormat || st.WritableAt == nil || time.Time(*st.WritableAt).After(time.Now()) || st.HeldBackBy == nil || len(st.HeldBackBy) != 0 {
		t.Fatalf("newest %d, writable at %v, held back by %#v", st.Newest, st.WritableAt, st.HeldBackBy)
	}
	// A live registration of a release that reads format 1 only is named.
	rdb := a.q.Redis()
	rdb.ZAdd(context.Background(), "sundial:{.storage}:readers", redis.Z{Score: float64(time.Now().Add(time.Minute).UnixMilli()), Member: "old-reader"})
	rdb.HSet(context.Background(), "sundial:{.storage}:reader-info", "old-reader", `{"id":"old-reader","role":"worker","reads":[1],"writes":1}`)
	a.do("GET", "/v1/storage", nil).decode(t, http.StatusOK, &st)
	if !slices.Equal(st.HeldBackBy, []string{"old-reader"}) {
		t.Fatalf("held back by %v, want old-reader", st.HeldBackBy)
	}
	// A worker of a release from before the storage format: it heartbeats
	// but does not register.
	old := queue.WorkerInfo{ID: "old-1", Hostname: "elsewhere", PID: 7, Queues: []string{"default"}, ActiveJobs: []string{}, StartedAt: time.Now().UTC()}
	if err := a.q.Heartbeat(context.Background(), old, time.Minute); err != nil {
		t.Fatal(err)
	}
	a.do("GET", "/v1/storage", nil).decode(t, http.StatusOK, &st)
	if !slices.Equal(st.Unregistered, []string{"old-1"}) {
		t.Fatalf("unregistered workers = %v, want old-1", st.Unregistered)
	}
	a.do("GET", "/v1/storage?x=1", nil).wantError(t, http.StatusBadRequest, codeInvalidArgument, "x")
}

// DELETE /v1/queues/{q} forgets an empty queue (204; it leaves the list),
// refuses one with jobs (409 naming why) and an unknown one (404).
func TestForgetQueue(t *testing.T) {
	a := start(t)
	a.do("DELETE", "/v1/queues/ghost", nil).wantError(t, http.StatusNotFound, codeNotFound, "")
	a.do("POST", "/v1/queues/empty/pause", nil).decode(t, http.StatusOK, nil)
	a.do("DELETE", "/v1/queues/empty", nil).wantError(t, http.StatusConflict, codeConflict, "")
	a.do("POST", "/v1/queues/empty/resume", nil).decode(t, http.StatusOK, nil)
	if r := a.do("DELETE", "/v1/queues/empty", nil); r.status != http.StatusNoContent {
		t.Fatalf("forget of an empty queue: %d %s", r.status, r.body)
	}
	a.do("GET", "/v1/queues/empty", nil).wantError(t, http.StatusNotFound, codeNotFound, "")
	a.submit(t, map[string]any{"type": "a", "queue": "busy"})
	r := a.do("DELETE", "/v1/queues/busy", nil)
	r.wantError(t, http.StatusConflict, codeConflict, "")
	if !strings.Contains(string(r.body), "queued") {
		t.Fatalf("the refusal does not say why: %s", r.body)
	}
}
