package audit

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/sundialhq/sundial/internal/mongotest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	code := mongotest.Run(m)
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// TestStoreQuery: records written to a real store (FerretDB) come back
// newest first, filtered by actor, action, target and time, in pages.
func TestStoreQuery(t *testing.T) {
	t.Parallel()
	_, db := mongotest.Client(t)
	s := NewStore(db, StoreOptions{Retention: time.Hour})
	ctx := context.Background()
	base := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	for i := range 7 {
		at := base.Add(time.Duration(i) * time.Minute)
		actor := "key:aaaaaaaaaaaa"
		if i%2 == 1 {
			actor = "key:bbbbbbbbbbbb"
		}
		r := Record{ID: NewID(at), At: at, Actor: Actor{Kind: ActorKey, ID: actor}, Action: "job.cancel",
			Target: fmt.Sprintf("job:%d", i), Outcome: OutcomeOK, Status: 200}
		if i == 6 {
			r.Action, r.Outcome, r.Status = "queue.pause", OutcomeRefused, 403
		}
		if err := s.Write(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	ids := func(rs []Record) (out []string) {
		for _, r := range rs {
			out = append(out, r.Target)
		}
		return out
	}
	check := func(name string, q Query, want ...string) string {
		t.Helper()
		got, next, err := s.Query(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(ids(got)) != fmt.Sprint(want) {
			t.Errorf("%s: got %v, want %v", name, ids(got), want)
		}
		return next
	}
	check("all", Query{}, "job:6", "job:5", "job:4", "job:3", "job:2", "job:1", "job:0")
	check("actor", Query{Actor: "key:bbbbbbbbbbbb"}, "job:5", "job:3", "job:1")
	check("action", Query{Action: "queue.pause"}, "job:6")
	check("target", Query{Target: "job:2"}, "job:2")
	check("time", Query{Since: base.Add(2 * time.Minute), Until: base.Add(4 * time.Minute)}, "job:3", "job:2")
	next := check("page 1", Query{Limit: 3}, "job:6", "job:5", "job:4")
	next = check("page 2", Query{Limit: 3, Cursor: next}, "job:3", "job:2", "job:1")
	if next = check("page 3", Query{Limit: 3, Cursor: next}, "job:0"); next != "" {
		t.Errorf("last page's cursor %q", next)
	}
	if _, _, err := s.Query(ctx, Query{Cursor: "nope"}); err != ErrInvalidCursor {
		t.Errorf("bad cursor: %v", err)
	}
	// Retention: records older than an hour go.
	n, err := s.Expire(ctx, base.Add(time.Hour+3*time.Minute+30*time.Second))
	if err != nil || n != 4 {
		t.Fatalf("Expire: %d, %v; want 4", n, err)
	}
	check("after expiry", Query{}, "job:6", "job:5", "job:4")
}
