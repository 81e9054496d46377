package history

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/sundialhq/sundial/pkg/job"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
)

func TestVersionsSortLikeEntryIDs(t *testing.T) {
	ids := []string{"9-0", "10-0", "10-2", "10-10", "1712345678901-0", "1712345678901-9", "1712345678901-10", "1712345678902-0"}
	var vs []string
	for _, id := range ids {
		v, err := parseVersion(id)
		if err != nil {
			t.Fatal(err)
		}
		if entryID(string(v)) != id {
			t.Fatalf("entryID(parseVersion(%s)) = %s", id, entryID(string(v)))
		}
		vs = append(vs, string(v))
	}
	if !slices.IsSorted(vs) {
		t.Fatalf("versions out of order: %v", vs)
	}
	for i := 1; i < len(ids); i++ {
		if compareIDs(ids[i-1], ids[i]) >= 0 || compareIDs(ids[i], ids[i-1]) <= 0 {
			t.Fatalf("compareIDs(%s, %s)", ids[i-1], ids[i])
		}
	}
	for _, bad := range []string{"", "12", "a-1", "1-b", "-"} {
		if _, err := parseVersion(bad); err == nil {
			t.Fatalf("parseVersion(%q) accepted", bad)
		}
	}
	for in, want := range map[string]string{"5-3": "5-4", "5-18446744073709551615": "6-0", "0-0": "0-1"} {
		if got := nextEntryID(in); got != want {
			t.Fatalf("nextEntryID(%s) = %s, want %s", in, got, want)
		}
	}
}

func TestParseEntry(t *testing.T) {
	m := redis.XMessage{ID: "1700000000000-1", Values: map[string]any{
		"job_id": "j", "queue": "q", "type": "t", "event": "failed", "state": "scheduled",
		"attempt": "2", "worker_id": "w", "error": "boom", "at": "1700000000123",
	}}
	evs, err := parseEntry("k", "q", m)
	if err != nil || len(evs) != 1 {
		t.Fatal(evs, err)
	}
	e := evs[0]
	if e.entry != m.ID || e.parts != 1 || e.version != "001700000000000-00000000000000000001" {
		t.Fatalf("placed %+v", e)
	}
	if e.JobID != "j" || e.Event.Event != job.EventFailed || e.State != job.Scheduled || e.Attempt != 2 ||
		e.WorkerID != "w" || e.Error != "boom" || e.At.UnixMilli() != 1700000000123 || e.ID != m.ID {
		t.Fatalf("parsed %+v", e)
	}
	// A batch entry: one event per job, in order, each with its own id and version.
	batch := redis.XMessage{ID: "1700000000000-2", Values: map[string]any{
		"jobs": "a t1 1,b t2 3", "queue": "q", "event": "started", "state": "active",
		"worker_id": "w", "error": "", "at": "1700000000123",
	}}
	evs, err = parseEntry("k", "q", batch)
	if err != nil || len(evs) != 2 {
		t.Fatal(evs, err)
	}
	for i, want := range []struct {
		id, job, typ string
		attempt      int
	}{{"1700000000000-2.0", "a", "t1", 1}, {"1700000000000-2.1", "b", "t2", 3}} {
		e := evs[i]
		if e.ID != want.id || e.JobID != want.job || e.Type != want.typ || e.Attempt != want.attempt ||
			e.Event.Event != job.EventStarted || e.WorkerID != "w" || e.entry != batch.ID || e.index != i || e.parts != 2 {
			t.Fatalf("batch event %d = %+v", i, e)
		}
		if got := entryID(strings.SplitN(eventDocID("q", e.version), "/", 2)[1]); got != want.id {
			t.Fatalf("stored event %d reads back as id %q, want %q", i, got, want.id)
		}
	}
	if !(evs[0].version < evs[1].version && evs[1].version < "001700000000000-00000000000000000003") {
		t.Fatalf("versions out of stream order: %s, %s", evs[0].version, evs[1].version)
	}
	for _, bad := range []map[string]any{{"queue": "q"}, {"job_id": "j", "event": "started", "attempt": "x"},
		{"jobs": "a t1", "event": "started"}, {"jobs": "a t1 x", "event": "started"}, {"jobs": "a t1 1,", "event": "started"}} {
		if _, err := parseEntry("k", "q", redis.XMessage{ID: "1-1", Values: bad}); err == nil {
			t.Fatalf("accepted %v", bad)
		}
	}
}

// TestFoldMirrorsTheEngine checks what a group of events sets and clears.
func TestFoldMirrorsTheEngine(t *testing.T) {
	evs := []*streamEvent{
		ev("q", "a", 0, job.EventSubmitted, job.Queued, 0),
		ev("q", "a", 1, job.EventStarted, job.Active, 1),
		ev("q", "a", 2, job.EventDead, job.Dead, 1),
		ev("q", "b", 3, job.EventStarted, job.Active, 1),
		ev("q", "a", 4, job.EventRetried, job.Queued, 0),
	}
	evs[2].Error = "bad"
	groups := groupByJob(evs)
	if len(groups) != 2 || groups[0].id != "a" || groups[1].id != "b" || len(groups[0].events) != 4 {
		t.Fatalf("groups: %+v", groups)
	}
	a := groups[0]
	set, unset := a.fields()
	get := func(k string) any {
		for _, e := range set {
			if e.Key == k {
				return e.Value
			}
		}
		return nil
	}
	if !a.first || a.final() || get(fState) != "queued" || get(fAttempt) != 0 || get(fLastError) != "bad" ||
		get(fStartedAt) != nil || get(fFinishedAt) != nil || get(fWorkerID) != nil {
		t.Fatalf("after retried: set %v", set)
	}
	var cleared []string
	for _, e := range unset {
		cleared = append(cleared, e.Key)
	}
	slices.Sort(cleared)
	if strings.Join(cleared, ",") != "finished_at,result,started_at,worker_id" {
		t.Fatalf("cleared %v", cleared)
	}
	doc := a.document()
	if doc[0].Key != fID || doc[0].Value != "a" || doc[1].Key != fCreatedAt || doc[1].Value != evs[0].At {
		t.Fatalf("document starts %v", doc[:2])
	}
	b := groups[1]
	if b.first || b.document()[1].Value != evs[3].At { // created_at falls back on the first event seen
		t.Fatalf("group b: %+v", b)
	}
	// b's update applies only over an older stored version.
	m := guardedUpsert(b).(*mongo.UpdateOneModel)
	f := m.Filter.(bson.D)
	want := bson.D{{Key: fID, Value: "b"}, {Key: fVersion, Value: bson.D{{Key: "$lt", Value: string(b.version)}}}}
	if !reflect.DeepEqual(f, want) || m.Upsert == nil || !*m.Upsert {
		t.Fatalf("guard %v (upsert %v), want %v", f, m.Upsert, want)
	}
}

func TestCursorAndRedact(t *testing.T) {
	c := cursor{CreatedAt: 1700000000000, ID: "01JD"}
	got, err := decodeCursor(encodeCursor(c))
	if err != nil || got != c {
		t.Fatalf("round trip: %+v, %v", got, err)
	}
	for _, bad := range []string{"", "!!", "e30", encodeCursor(cursor{CreatedAt: 1})} {
		if _, err := decodeCursor(bad); err == nil {
			t.Fatalf("decodeCursor(%q) accepted", bad)
		}
	}
	uri := "mongodb://user:s3cret@db:27017/?authSource=admin"
	if msg := redact("cannot reach "+uri, uri); strings.Contains(msg, "s3cret") {
		t.Fatalf("password leaked: %s", msg)
	}
}
