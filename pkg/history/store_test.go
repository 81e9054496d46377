package history

import (
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sundialhq/sundial/internal/mongotest"
	"github.com/sundialhq/sundial/pkg/job"
	"github.com/sundialhq/sundial/pkg/queue"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

var t0 = time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)

// ev makes a stream event of job id in queue q at stream position ms-0.
func ev(q, id string, ms int64, et job.EventType, st job.State, attempt int) *streamEvent {
	entry := fmt.Sprintf("%d-0", t0.UnixMilli()+ms)
	v, _ := parseVersion(entry)
	e := &streamEvent{stream: queue.EventStreamKey(q), version: v}
	e.Event = job.Event{ID: entry, JobID: id, Queue: q, Type: "t", Event: et, State: st, Attempt: attempt, At: t0.Add(time.Duration(ms) * time.Millisecond)}
	if st == job.Active {
		e.WorkerID = "w1"
	}
	return e
}

// write stores events as one batch, the way the writer does.
func (e *env) write(events ...*streamEvent) writeStats {
	e.t.Helper()
	st, err := e.store.write(e.ctx, events, groupByJob(events))
	if err != nil {
		e.t.Fatalf("write: %v", err)
	}
	return st
}

func (e *env) job(id string) *job.Job {
	e.t.Helper()
	j, err := e.store.Job(e.ctx, id)
	if err != nil {
		e.t.Fatalf("job %s: %v", id, err)
	}
	return j
}

// TestOlderEventNeverOverwritesNewer writes a job's events out of order and
// checks the document always shows the newest state.
func TestOlderEventNeverOverwritesNewer(t *testing.T) {
	e := newEnv(t)
	sub := ev("q", "j1", 0, job.EventSubmitted, job.Queued, 0)
	start := ev("q", "j1", 10, job.EventStarted, job.Active, 1)
	fail := ev("q", "j1", 20, job.EventFailed, job.Queued, 1)
	fail.Error = "boom"
	start2 := ev("q", "j1", 30, job.EventStarted, job.Active, 2)
	done := ev("q", "j1", 40, job.EventSucceeded, job.Succeeded, 2)

	e.write(sub, start)
	if j := e.job("j1"); j.State != job.Active || j.Attempt != 1 {
		t.Fatalf("after start: %s attempt %d", j.State, j.Attempt)
	}
	e.write(fail, start2, done)
	want := e.job("j1")
	if want.State != job.Succeeded || want.Attempt != 2 || want.LastError != "boom" || want.FinishedAt == nil ||
		!want.StartedAt.Equal(start2.At) || !want.CreatedAt.Equal(sub.At) {
		t.Fatalf("after success: %+v", want)
	}
	// Every older batch again, alone and in any order: nothing changes.
	for _, batch := range [][]*streamEvent{{start}, {sub, start}, {fail}, {start2}, {sub}, {fail, start2}, {sub, start, fail, start2}} {
		st := e.write(batch...)
		if st.jobsUpdated != 0 {
			t.Fatalf("batch %v updated the job: %+v", batch, st)
		}
		if got := e.job("j1"); !reflect.DeepEqual(got, want) {
			t.Fatalf("an older batch changed the job:\n got %+v\nwant %+v", got, want)
		}
	}
	// A newer event still applies: retried by hand clears the run's fields.
	e.write(ev("q", "j1", 50, job.EventDead, job.Dead, 2)) // (as if it had died instead)
	e.write(ev("q", "j1", 60, job.EventRetried, job.Queued, 0))
	j := e.job("j1")
	if j.State != job.Queued || j.Attempt != 0 || j.FinishedAt != nil || j.StartedAt != nil || j.WorkerID != "" || j.LastError != "boom" {
		t.Fatalf("after retried: %+v", j)
	}
	if n := e.count(e.db, EventsCollection); n != 7 {
		t.Fatalf("%d events stored, want 7", n)
	}
}

// TestReplayChangesNothing records a stream, then writes the same entries
// again in other batch shapes (whole, one by one, newest first, shuffled),
// and checks that every document stays as it was.
func TestReplayChangesNothing(t *testing.T) {
	e := newEnv(t)
	const q = "replay"
	stream := e.mixedStream(q, 30)
	entries := e.rdb.XLen(e.ctx, queue.EventStreamKey(q)).Val()
	// Another consumer group that reads nothing: the writer must not trim
	// what it has not acknowledged, so the whole stream stays for the replay.
	key := queue.EventStreamKey(q)
	if err := e.rdb.XGroupCreate(e.ctx, key, "audit", "0").Err(); err != nil {
		t.Fatal(err)
	}

	// First through the writer, as in production.
	w, stop := e.startWriter(e.store, testWriterConfig())
	waitFor(t, 30*time.Second, "stream recorded", func() bool {
		return e.count(e.db, EventsCollection) == int64(len(stream)) && e.count(e.db, JobsCollection) == 30
	})
	waitFor(t, 10*time.Second, "a backlog measurement after the writes", func() bool {
		return w.Backlog().Events == 0 && !w.Backlog().At.IsZero()
	})
	stop()
	if n := e.rdb.XLen(e.ctx, key).Val(); n != entries {
		t.Fatalf("the writer trimmed entries another group has not read: %d of %d left", n, entries)
	}
	before := e.snapshot(e.db)

	reversed := slices.Clone(stream)
	slices.Reverse(reversed)
	shuffled := slices.Clone(stream)
	rand.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	e.write(stream...)
	for _, s := range reversed {
		e.write(s)
	}
	for i := 0; i < len(shuffled); i += 7 {
		e.write(shuffled[i:min(i+7, len(shuffled))]...)
	}
	if after := e.snapshot(e.db); !reflect.DeepEqual(before, after) {
		t.Fatalf("replays changed the history:\nbefore %v\nafter  %v", before, after)
	}

	// And through the writer again: rewind the group to the stream's start.
	if err := e.rdb.XGroupSetID(e.ctx, key, DefaultGroup, "0").Err(); err != nil {
		t.Fatal(err)
	}
	w, _ = e.startWriter(e.store, testWriterConfig())
	// The rewound entries are all duplicates now: wait until the writer has
	// replayed them (its duplicate counter moves) and caught up again.
	waitFor(t, 30*time.Second, "the writer replaying the stream", func() bool {
		return counterValue(t, w.metrics.duplicates) > 0 && w.Backlog().Events == 0
	})
	if after := e.snapshot(e.db); !reflect.DeepEqual(before, after) {
		t.Fatalf("a replay through the writer changed the history")
	}
}

// TestSearchPaging pages through jobs sharing created_at milliseconds,
// under each filter, and checks that every matching job appears exactly
// once, newest first, even while newer jobs arrive between pages.
func TestSearchPaging(t *testing.T) {
	e := newEnv(t)
	type info struct {
		queue, typ string
		state      job.State
		at         time.Time
	}
	queues, types := []string{"qa", "qb"}, []string{"t.x", "t.y", "t.z"}
	finals := []job.State{job.Succeeded, job.Dead, job.Cancelled}
	var events []*streamEvent
	all := map[string]info{}
	for i := 0; i < 150; i++ {
		q := queues[i%2]
		id := fmt.Sprintf("job-%03d", i)
		sub := ev(q, id, int64(i/4)*5, job.EventSubmitted, job.Queued, 0) // 4 jobs per millisecond
		sub.Type = types[i%3]
		end := ev(q, id, 10_000+int64(i), job.EventType(finals[i%3]), finals[i%3], 1)
		end.Type = sub.Type
		events = append(events, sub, end)
		all[id] = info{q, sub.Type, finals[i%3], sub.At}
	}
	e.write(events...)

	cases := []Query{
		{}, {Queue: "qa"}, {Type: "t.y"}, {State: job.Dead}, {Queue: "qb", State: job.Succeeded},
		{From: t0.Add(20 * time.Millisecond), To: t0.Add(100 * time.Millisecond)},
	}
	late := 0
	for _, base := range cases {
		var want []string
		for id, s := range all {
			if (base.Queue == "" || s.queue == base.Queue) && (base.Type == "" || s.typ == base.Type) &&
				(base.State == "" || s.state == base.State) &&
				(base.From.IsZero() || !s.at.Before(base.From)) && (base.To.IsZero() || s.at.Before(base.To)) {
				want = append(want, id)
			}
		}
		slices.SortFunc(want, func(a, b string) int { // newest first, then id descending
			if c := all[b].at.Compare(all[a].at); c != 0 {
				return c
			}
			return -cmpString(a, b)
		})
		var got []string
		arrived := map[string]info{}
		q := base
		q.Limit = 7
		for {
			jobs, next, err := e.store.Search(e.ctx, q)
			if err != nil {
				t.Fatalf("%+v: %v", q, err)
			}
			if len(jobs) > 7 {
				t.Fatalf("page of %d jobs, limit 7", len(jobs))
			}
			for _, j := range jobs {
				got = append(got, j.ID)
			}
			if next == "" {
				break
			}
			// A newer job arrives between pages: it must not show up later.
			late++
			id := fmt.Sprintf("late-%03d", late)
			l := ev("qa", id, 20_000+int64(late), job.EventSubmitted, job.Queued, 0)
			e.write(l)
			arrived[id] = info{"qa", l.Type, job.Queued, l.At}
			q.Cursor = next
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("search %+v:\n got %v\nwant %v", base, got, want)
		}
		maps.Copy(all, arrived) // the later cases see them
	}
	if _, _, err := e.store.Search(e.ctx, Query{Cursor: "not-a-cursor"}); !errors.Is(err, ErrInvalidCursor) {
		t.Fatalf("bad cursor: %v, want ErrInvalidCursor", err)
	}
	jobs, _, err := e.store.Search(e.ctx, Query{Limit: 10_000}) // taken as MaxLimit
	if err != nil || len(jobs) != min(len(all), MaxLimit) {
		t.Fatalf("limit above the maximum: %d jobs, %v; want %d", len(jobs), err, min(len(all), MaxLimit))
	}
	if jobs, _, err = e.store.Search(e.ctx, Query{}); err != nil || len(jobs) != DefaultLimit {
		t.Fatalf("default limit: %d jobs, %v; want %d", len(jobs), err, DefaultLimit)
	}
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// TestSetupAndExpire checks the server detection, the indexes and the
// janitor's retention.
func TestSetupAndExpire(t *testing.T) {
	e := newEnv(t)
	if !e.store.FerretDB() {
		t.Fatal("FerretDB not detected")
	}
	for _, ix := range indexes {
		specs, err := e.db.Collection(ix.coll).Indexes().ListSpecifications(e.ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.ContainsFunc(specs, func(s mongo.IndexSpecification) bool { return s.Name == ix.name }) {
			t.Fatalf("index %s.%s missing", ix.coll, ix.name)
		}
	}
	e.write(ev("q", "old", 0, job.EventSubmitted, job.Queued, 0), ev("q", "old", 1, job.EventSucceeded, job.Succeeded, 1))
	e.write(ev("q", "new", 3_600_000, job.EventSubmitted, job.Queued, 0))
	store := NewStore(e.db, StoreOptions{Retention: 30 * time.Minute, Logger: quietLog()})
	n, err := store.Expire(e.ctx, t0.Add(time.Hour))
	if err != nil || n != 3 {
		t.Fatalf("expire: %d deleted, %v; want 3 (a job and its two events)", n, err)
	}
	if _, err := e.store.Job(e.ctx, "old"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("expired job still there: %v", err)
	}
	if j := e.job("new"); j.State != job.Queued {
		t.Fatalf("recent job: %+v", j)
	}
}

// TestSearchIndexesServeTheSort checks that every filter of the search has
// an index of its equality fields followed by the whole sort (created_at,
// _id): MongoDB walks such an index in order and stops after a page;
// without _id it sorts every matching job in memory. The search indexes of
// earlier releases (without _id) are dropped by Setup.
func TestSearchIndexesServeTheSort(t *testing.T) {
	t.Parallel()
	_, db := mongotest.Client(t)
	ctx := t.Context()
	oldKeys := map[string]bson.D{
		"queue_state_created": {{Key: fQueue, Value: 1}, {Key: fState, Value: 1}, {Key: fCreatedAt, Value: 1}},
		"type_created":        {{Key: fType, Value: 1}, {Key: fCreatedAt, Value: 1}},
		"group_created":       {{Key: fGroup, Value: 1}, {Key: fCreatedAt, Value: 1}},
	}
	for _, old := range replacedIndexes { // a store set up by an earlier release
		m := mongo.IndexModel{Keys: oldKeys[old.name], Options: options.Index().SetName(old.name)}
		if _, err := db.Collection(old.coll).Indexes().CreateOne(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	store := NewStore(db, StoreOptions{Logger: quietLog()})
	if err := store.Setup(ctx); err != nil {
		t.Fatal(err)
	}
	specs, err := db.Collection(JobsCollection).Indexes().ListSpecifications(ctx)
	if err != nil {
		t.Fatal(err)
	}
	keysOf := map[string]string{}
	for _, s := range specs {
		var d bson.D
		if err := bson.Unmarshal(s.KeysDocument, &d); err != nil {
			t.Fatal(err)
		}
		var ks []string
		for _, e := range d {
			ks = append(ks, e.Key)
		}
		keysOf[s.Name] = fmt.Sprint(ks)
	}
	for _, old := range replacedIndexes {
		if _, ok := keysOf[old.name]; ok {
			t.Errorf("replaced index %s still there", old.name)
		}
	}
	// The dashboard's filters (GET /v1/jobs): the equality fields of each.
	for _, eq := range [][]string{{}, {fQueue, fState}, {fType, fState}, {fType}, {fState}, {fGroup}} {
		want := fmt.Sprint(append(slices.Clone(eq), fCreatedAt, fID))
		if !slices.Contains(slices.Collect(maps.Values(keysOf)), want) {
			t.Errorf("no index %s for a search by %v; indexes: %v", want, eq, keysOf)
		}
	}
}

// TestUnknownJobIsCreated writes events of a job whose submitted event was
// never seen (trimmed from a full stream, or its document expired): the
// document is created from what the events know.
func TestUnknownJobIsCreated(t *testing.T) {
	e := newEnv(t)
	start := ev("q", "lost", 10, job.EventStarted, job.Active, 1)
	st := e.write(start)
	if st.jobsInserted != 1 {
		t.Fatalf("write: %+v, want one job created", st)
	}
	j := e.job("lost")
	if j.State != job.Active || !j.CreatedAt.Equal(start.At) || j.WorkerID != "w1" {
		t.Fatalf("created from a started event: %+v", j)
	}
	e.write(ev("q", "lost", 20, job.EventSucceeded, job.Succeeded, 1))
	if j := e.job("lost"); j.State != job.Succeeded || !j.CreatedAt.Equal(start.At) {
		t.Fatalf("after success: %+v", j)
	}
}

// TestSearchByDependency: DependsOn finds the jobs whose depends_on holds
// any of the ids given (the depends_on index serves it), and no other.
func TestSearchByDependency(t *testing.T) {
	e := newEnv(t)
	docs := []any{
		jobDoc{ID: "c1", Queue: "qa", Type: "t", State: "queued", CreatedAt: t0, DependsOn: []string{"p1"}},
		jobDoc{ID: "c2", Queue: "qb", Type: "t", State: "queued", CreatedAt: t0.Add(time.Millisecond), DependsOn: []string{"x", "qa|p1"}},
		jobDoc{ID: "c3", Queue: "qa", Type: "t", State: "queued", CreatedAt: t0, DependsOn: []string{"p2"}},
		jobDoc{ID: "p1", Queue: "qa", Type: "t", State: "succeeded", CreatedAt: t0},
	}
	if _, err := e.db.Collection(JobsCollection).InsertMany(e.ctx, docs); err != nil {
		t.Fatal(err)
	}
	jobs, _, err := e.store.Search(e.ctx, Query{DependsOn: []string{"p1", "qa|p1"}})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, j := range jobs {
		ids = append(ids, j.ID)
	}
	if !slices.Equal(ids, []string{"c2", "c1"}) {
		t.Fatalf("dependents of p1: %v, want [c2 c1]", ids)
	}
}

// TestSearchByTagAndPayload searches a large history by a tag and by top-level
// payload field values, through the indexes the store makes, and says how
// long each search took (SUNDIAL_HISTORY_SEARCH_N sets the size; 100,000
// is the measurement, CI runs fewer).
func TestSearchByTagAndPayload(t *testing.T) {
	e := newEnv(t)
	if err := e.store.Setup(e.ctx); err != nil {
		t.Fatal(err)
	}
	n := 20000
	if v, err := strconv.Atoi(os.Getenv("SUNDIAL_HISTORY_SEARCH_N")); err == nil && v > 0 {
		n = v
	}
	const chunk = 5000
	start := time.Now()
	for base := 0; base < n; base += chunk {
		docs := make([]any, 0, chunk)
		for i := base; i < min(base+chunk, n); i++ {
			h := &jobHash{payload: fmt.Sprintf(`{"customer":"c%d","n":%d,"nested":{"x":1}}`, i%1000, i),
				tags: []string{fmt.Sprintf("region=%d", i%10)}}
			d := bson.D{{Key: fID, Value: fmt.Sprintf("j%07d", i)}, {Key: fQueue, Value: "q"}, {Key: fType, Value: "t"},
				{Key: fState, Value: "succeeded"}, {Key: fCreatedAt, Value: t0.Add(time.Duration(i) * time.Millisecond)}}
			docs = append(docs, append(d, h.fields()...))
		}
		if _, err := e.db.Collection(JobsCollection).InsertMany(e.ctx, docs); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("inserted %d jobs in %v", n, time.Since(start))

	search := func(q Query) []*job.Job {
		t.Helper()
		q.Limit = MaxLimit
		start := time.Now()
		var all []*job.Job
		for {
			jobs, next, err := e.store.Search(e.ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			all = append(all, jobs...)
			if next == "" {
				break
			}
			q.Cursor = next
		}
		t.Logf("search %+v: %d jobs in %v", q, len(all), time.Since(start))
		return all
	}
	byCustomer := search(Query{Payload: []string{PayloadTerm("customer", "c7")}})
	if len(byCustomer) != n/1000 {
		t.Fatalf("customer c7: %d jobs, want %d", len(byCustomer), n/1000)
	}
	for _, j := range byCustomer {
		if !bytesContains(j.Payload, `"customer":"c7"`) {
			t.Fatalf("job %s does not match: %s", j.ID, j.Payload)
		}
	}
	if n > 7008 {
		one := search(Query{Payload: []string{PayloadTerm("customer", "c7"), PayloadTerm("n", "7007")}})
		if len(one) != 1 || one[0].ID != "j0007007" {
			t.Fatalf("customer c7 and n 7007: %d jobs", len(one))
		}
		if none := search(Query{Payload: []string{PayloadTerm("customer", "c7"), PayloadTerm("n", "7008")}}); len(none) != 0 {
			t.Fatalf("customer c7 and n 7008 (customer c8's): %d jobs", len(none))
		}
	}
	tagged := search(Query{Tag: "region=3", Limit: 0})
	if len(tagged) != n/10 {
		t.Fatalf("tag region=3: %d jobs, want %d", len(tagged), n/10)
	}
	if !slices.Contains(tagged[0].Tags, "region=3") {
		t.Fatalf("tags read back %v", tagged[0].Tags)
	}
	if nested := search(Query{Payload: []string{PayloadTerm("nested", `{"x":1}`)}}); len(nested) != 0 {
		t.Fatalf("a nested object matched %d jobs", len(nested))
	}
}

func bytesContains(b []byte, s string) bool { return strings.Contains(string(b), s) }
