package queue_test

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sundialhq/sundial/internal/logbuf"
	"github.com/sundialhq/sundial/pkg/job"
	"github.com/sundialhq/sundial/pkg/queue"
	"github.com/sundialhq/sundial/pkg/queue/queuetest"
)

// The storage format's keys, as docs/engine.md names them.
const (
	formatKey  = "sundial:{.storage}:format"
	readersKey = "sundial:{.storage}:readers"
)

func submitOne(ctx context.Context, q *queue.Client) error {
	s := job.Spec{Type: "t"}
	j, err := s.Build(time.Now())
	if err != nil {
		return err
	}
	_, err = q.Submit(ctx, []*job.Job{j})
	return err
}

func TestRegisterRecordsAndRemovesTheReader(t *testing.T) {
	t.Parallel()
	srv := queuetest.Start(t)
	q := queue.New(srv.Client(), queue.Options{})
	ctx := context.Background()

	rctx, reg := q.Register(ctx, "worker", nil)
	if rctx.Err() != nil {
		t.Fatalf("registered context ended: %v", context.Cause(rctx))
	}
	st, err := q.Storage(ctx, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	// A new Redis: no reader lacks the newest format, so the marker moved to it.
	if st.Format != strconv.Itoa(queue.WriteFormat) || len(st.Readers) != 1 {
		t.Fatalf("storage = %+v, want format %d and one reader", st, queue.WriteFormat)
	}
	r := st.Readers[0]
	if r.ID != reg.ID() || r.Role != "worker" || !slices.Equal(r.Reads, queue.ReadFormats()) || r.Writes != queue.WriteFormat {
		t.Fatalf("reader = %+v", r)
	}
	if left := time.Until(r.ExpiresAt); left <= 0 || left > queue.ReaderTTL {
		t.Fatalf("registration expires in %v, want within %v", left, queue.ReaderTTL)
	}
	if err := submitOne(ctx, q); err != nil {
		t.Fatalf("submit while registered: %v", err)
	}

	// A lapsed entry (its process gone without removing it) is not listed,
	// and the next registration drops it.
	rdb := srv.Client()
	rdb.ZAdd(ctx, readersKey, redis.Z{Score: float64(time.Now().Add(-time.Minute).UnixMilli()), Member: "gone"})
	if st, _ := q.Storage(ctx, time.Minute); len(st.Readers) != 1 {
		t.Fatalf("a lapsed registration is listed: %+v", st.Readers)
	}
	_, other := q.Register(ctx, "poller", nil)
	if n := rdb.ZScore(ctx, readersKey, "gone").Err(); n != redis.Nil {
		t.Fatalf("the lapsed entry is still in the registry (%v)", n)
	}
	if st, _ := q.Storage(ctx, time.Minute); len(st.Readers) != 2 {
		t.Fatalf("readers = %+v, want two", st.Readers)
	}

	if err := reg.Close(); err != nil {
		t.Fatal(err)
	}
	if err := other.Close(); err != nil {
		t.Fatal(err)
	}
	if rctx.Err() == nil {
		t.Fatal("the registered context did not end with Close")
	}
	if n := rdb.ZCard(ctx, readersKey).Val(); n != 0 {
		t.Fatalf("%d registrations left after Close", n)
	}
	// Closed: the client is no longer fenced.
	if err := submitOne(ctx, q); err != nil {
		t.Fatalf("submit after Close: %v", err)
	}
}

// A worker of a release from before the storage format heartbeats into the
// worker registry but does not register as a reader: Storage names it. A
// registered worker process and an HTTP worker are not named.
func TestStorageNamesUnregisteredWorkers(t *testing.T) {
	t.Parallel()
	srv := queuetest.Start(t)
	q := queue.New(srv.Client(), queue.Options{})
	ctx := context.Background()
	host, _ := os.Hostname()
	beat := func(id, host string, pid int) {
		t.Helper()
		w := queue.WorkerInfo{ID: id, Hostname: host, PID: pid, Queues: []string{"default"}, ActiveJobs: []string{}, StartedAt: time.Now()}
		if err := q.Heartbeat(ctx, w, time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	beat("old", "elsewhere", 7)
	beat("this", host, os.Getpid())
	beat("http-1", queue.HTTPWorkerHost+"10.0.0.1", 0)
	unregistered := func() []string {
		t.Helper()
		st, err := q.Storage(ctx, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		slices.Sort(st.Unregistered)
		return st.Unregistered
	}
	if got := unregistered(); !slices.Equal(got, []string{"old", "this"}) {
		t.Fatalf("unregistered = %v before this process registered, want old and this", got)
	}
	_, reg := q.Register(ctx, "worker", nil)
	defer reg.Close()
	if got := unregistered(); !slices.Equal(got, []string{"old"}) {
		t.Fatalf("unregistered = %v, want only the old worker", got)
	}
}

// A release refuses to run against a Redis holding a format it does not
// read: the registration fails, its context ends, and no script runs.
func TestRegisterRefusesAFormatItDoesNotRead(t *testing.T) {
	t.Parallel()
	for _, marker := range []string{strconv.Itoa(queue.WriteFormat + 1), "garbage"} {
		t.Run(marker, func(t *testing.T) {
			srv := queuetest.Start(t)
			rdb := srv.Client()
			ctx := context.Background()
			rdb.HSet(ctx, formatKey, "format", marker)
			q := queue.New(rdb, queue.Options{})

			rctx, reg := q.Register(ctx, "api", nil)
			var fe *queue.FormatError
			if !errors.As(context.Cause(rctx), &fe) || fe.Format != marker {
				t.Fatalf("context cause = %v, want a FormatError for %q", context.Cause(rctx), marker)
			}
			if err := submitOne(ctx, q); !errors.As(err, &fe) {
				t.Fatalf("submit after the refusal = %v, want the FormatError", err)
			}
			if err := reg.Close(); !errors.As(err, &fe) {
				t.Fatalf("Close = %v, want the FormatError", err)
			}
			// The refusal sticks: a closed registration does not unfence it.
			if err := submitOne(ctx, q); !errors.As(err, &fe) {
				t.Fatalf("submit after Close = %v, want the FormatError", err)
			}
			if n := rdb.ZCard(ctx, readersKey).Val(); n != 0 {
				t.Fatalf("a refused process is registered (%d entries)", n)
			}
			if n := rdb.Exists(ctx, queue.QueueKey("default", "normal")).Val(); n != 0 {
				t.Fatal("a refused client wrote a job")
			}
		})
	}
}

// The marker moving while a process runs stops it at its next renewal.
// Not parallel: it shortens the renewal interval of the package.
func TestMarkerMovingStopsARegisteredProcess(t *testing.T) {
	defer queue.SetRegistrationTiming(queue.ReaderTTL, 50*time.Millisecond, 50*time.Millisecond)()
	srv := queuetest.Start(t)
	rdb := srv.Client()
	q := queue.New(rdb, queue.Options{})
	ctx := context.Background()
	rctx, reg := q.Register(ctx, "poller", nil)
	defer reg.Close()
	if err := submitOne(ctx, q); err != nil {
		t.Fatal(err)
	}
	next := strconv.Itoa(queue.WriteFormat + 1)
	rdb.HSet(ctx, formatKey, "format", next)
	select {
	case <-rctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the registered context did not end after the marker moved")
	}
	var fe *queue.FormatError
	if !errors.As(context.Cause(rctx), &fe) || fe.Format != next {
		t.Fatalf("cause = %v", context.Cause(rctx))
	}
	if err := submitOne(ctx, q); !errors.As(err, &fe) {
		t.Fatalf("submit after the marker moved = %v, want the FormatError", err)
	}
}

// A process that cannot renew its registration for the registration's
// lifetime runs no script until it renews: a switch that waited that long
// after moving the marker cannot meet it still writing.
// Not parallel: it changes the registration's timing.
func TestLapsedRegistrationStopsScripts(t *testing.T) {
	defer queue.SetRegistrationTiming(300*time.Millisecond, time.Hour, time.Hour)()
	srv := queuetest.Start(t)
	q := queue.New(srv.Client(), queue.Options{})
	ctx := context.Background()
	_, reg := q.Register(ctx, "worker", nil)
	if err := submitOne(ctx, q); err != nil {
		t.Fatalf("submit while the registration is live: %v", err)
	}
	// No renewal comes (an hour apart): the registration lapses.
	deadline := time.Now().Add(10 * time.Second)
	for err := submitOne(ctx, q); !errors.Is(err, queue.ErrNotRegistered); err = submitOne(ctx, q) {
		if err != nil {
			t.Fatalf("submit = %v, want success, then ErrNotRegistered", err)
		}
		if time.Now().After(deadline) {
			t.Fatal("the registration never lapsed")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := reg.Close(); err != nil {
		t.Fatal(err)
	}
	if err := submitOne(ctx, q); err != nil {
		t.Fatalf("submit after Close: %v", err)
	}
}

// A process that starts while Redis is down is not refused: it registers
// once Redis answers, and its engine calls work from then on.
// Not parallel: it changes the registration's timing.
func TestRegisterWaitsForRedis(t *testing.T) {
	defer queue.SetRegistrationTiming(queue.ReaderTTL, time.Second, 50*time.Millisecond)()
	srv := queuetest.Start(t)
	srv.Kill()
	rdb := srv.Client()
	tries := &registrations{}
	rdb.AddHook(tries)
	q := queue.New(rdb, queue.Options{})
	ctx := context.Background()
	var logs logbuf.Buffer
	rctx, reg := q.Register(ctx, "api", slog.New(slog.NewTextHandler(&logs, nil)))
	defer reg.Close()
	if _, _, err := q.Promote(ctx, "default", 10); !errors.Is(err, queue.ErrNotRegistered) {
		t.Fatalf("a script call before registering = %v, want ErrNotRegistered", err)
	}
	// Attempts every 50 ms fail meanwhile; the streak is logged once.
	queuetest.Eventually(t, 20*time.Second, "three failed attempts", func() bool { return tries.n.Load() >= 3 })
	srv.Restart()
	queuetest.Eventually(t, 10*time.Second, "a submit after Redis came back", func() bool { return submitOne(ctx, q) == nil })
	if rctx.Err() != nil {
		t.Fatalf("Redis being down refused the process: %v", context.Cause(rctx))
	}
	queuetest.Eventually(t, 10*time.Second, "the recovery logged", func() bool {
		return strings.Contains(logs.String(), "registered as a reader of the storage format again")
	})
	if n := strings.Count(logs.String(), "failed; retrying"); n != 1 {
		t.Fatalf("the failed attempts were logged %d times, want once:\n%s", n, logs.String())
	}
}

// registrations counts the registration script's calls a client sends.
type registrations struct{ n atomic.Int32 }

func (r *registrations) DialHook(next redis.DialHook) redis.DialHook { return next }
func (r *registrations) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (r *registrations) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		// FCALL name numkeys key…: the registration's first key is the marker.
		if a := cmd.Args(); len(a) > 3 && a[3] == formatKey {
			r.n.Add(1)
		}
		return next(ctx, cmd)
	}
}
