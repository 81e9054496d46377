package history

import (
	"reflect"
	"testing"
	"time"

	"github.com/sundialhq/sundial/internal/mongotest"
	"github.com/sundialhq/sundial/pkg/job"
)

// TestImportWritesWhatTheWriterWrites: the events of a queue's stream and
// its jobs, imported into an empty database, give the same documents as the
// writer reading that stream (batched and single entries, retries, results,
// errors); importing them again changes nothing; a bad event id is refused
// with nothing written.
func TestImportWritesWhatTheWriterWrites(t *testing.T) {
	e := newEnv(t)
	const q = "import"
	stream := e.mixedStream(q, 12)

	_, stop := e.startWriter(e.store, testWriterConfig())
	waitFor(t, 30*time.Second, "stream recorded", func() bool {
		return e.count(e.db, EventsCollection) == int64(len(stream)) && e.count(e.db, JobsCollection) == 12
	})
	stop()
	want := e.snapshot(e.db)

	events := make([]job.Event, len(stream))
	seen := map[string]bool{}
	var jobs []*job.Job
	for i, s := range stream {
		events[i] = s.Event
		if !seen[s.JobID] {
			seen[s.JobID] = true
			j, err := e.q.Get(e.ctx, s.JobID)
			if err != nil {
				t.Fatal(err)
			}
			jobs = append(jobs, j)
		}
	}
	_, other := mongotest.Client(t)
	store := NewStore(other, StoreOptions{Logger: quietLog()})
	bad := append([]job.Event{{ID: "not-an-id", JobID: "x", Queue: q}}, events...)
	if err := store.Import(e.ctx, bad, jobs); err == nil {
		t.Fatal("an event id that is no stream id was taken")
	}
	if n := e.count(other, JobsCollection) + e.count(other, EventsCollection); n != 0 {
		t.Fatalf("a refused import wrote %d documents", n)
	}
	for range 2 {
		if err := store.Import(e.ctx, events, jobs); err != nil {
			t.Fatal(err)
		}
		if got := e.snapshot(other); !reflect.DeepEqual(got, want) {
			t.Fatalf("imported documents differ from the writer's:\nimported %v\nwriter   %v", got, want)
		}
	}
}
