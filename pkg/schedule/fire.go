package schedule

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/errgroup"

	"github.com/sundialhq/sundial/pkg/job"
	"github.com/sundialhq/sundial/pkg/queue"
)

// putAside is how far an unusable definition (one this version cannot
// compile or build) is pushed back, so it is retried now and then without
// making the scheduler spin.
const putAside = time.Hour

// FireDue runs one pass: it fires every schedule whose next run has come,
// once per fire time its misfire policy asks for, and returns when the
// earliest next run will be (the zero Time when no schedule is enabled, or
// now when there is more to do at once). The Scheduler's leader calls it
// in a loop; tests and tools may call it directly. It is safe to call from
// several processes at once: a fire time is only ever fired by one.
func (s *Scheduler) FireDue(ctx context.Context) (time.Time, error) {
	now := s.q.Now()
	batch, next, err := s.collect(ctx, now)
	if err != nil || len(batch) == 0 {
		return next, err
	}
	earliest := func(t time.Time) {
		if !t.IsZero() && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	// One schedule's failure must not hold the others back: every fire
	// runs, and the first error is returned.
	var (
		mu    sync.Mutex
		first error
		g     errgroup.Group
	)
	g.SetLimit(s.cfg.Concurrency)
	for _, d := range batch {
		g.Go(func() error {
			n, err := s.fire(ctx, d, now)
			mu.Lock()
			defer mu.Unlock()
			earliest(n)
			if err != nil && first == nil {
				first = err
			}
			return nil
		})
	}
	_ = g.Wait()
	return next, first
}

// fire fires one due schedule and returns its new next run (zero when
// there is none, or when another scheduler or a change moved it first).
func (s *Scheduler) fire(ctx context.Context, d due, now time.Time) (time.Time, error) {
	k := keysFor(d.queue)
	log := func() *slog.Logger { return s.log.With("schedule_id", d.id, "queue", d.queue) }
	debug := s.log.Enabled(ctx, slog.LevelDebug)
	switch {
	case d.def == nil || d.def.err == nil && d.def.rec.Job.Queue != d.queue:
		log().Warn("removing a planned run without a definition in its queue")
		return time.Time{}, s.advance(ctx, k, d, "")
	case d.def.err != nil:
		log().Error("schedule definition or job template unusable; retrying in an hour", "err", d.def.err)
		return time.Time{}, s.advance(ctx, k, d, strconv.FormatInt(now.Add(putAside).UnixMilli(), 10))
	}
	times, nextT := d.def.tt.Due(time.UnixMilli(d.planned), now)
	nextMS := strconv.FormatInt(nextT.UnixMilli(), 10)
	if nextT.IsZero() {
		nextMS = ""
	}
	if len(times) == 0 {
		if debug {
			log().Debug("misfires skipped", "planned", time.UnixMilli(d.planned))
		}
		return nextT, s.advance(ctx, k, d, nextMS)
	}
	jobs := make([]*job.Job, len(times))
	for i, at := range times {
		jobs[i] = d.def.newJob(at, now)
	}
	last := len(jobs) - 1
	g := queue.Guard{
		Key: k.next, Member: d.id, Expect: d.planned, Next: nextT.UnixMilli(), Remove: nextT.IsZero(),
		Record: k.runs, Fields: []string{d.id, runsValue(times[last], jobs[last].ID)},
	}
	if _, err := s.cfg.Fire.SubmitGuarded(ctx, g, jobs); err != nil {
		if errors.Is(err, queue.ErrGuardMismatch) {
			if debug {
				log().Debug("fire time already moved by another scheduler or a change")
			}
			return now, nil
		}
		if refused(err) {
			// Redis ran the script and refused it: this schedule's fires
			// fail, not Redis. Put it aside rather than slowing every pass.
			log().Error("submitting the schedule's job failed; retrying in an hour", "err", err)
			return time.Time{}, s.advance(ctx, k, d, strconv.FormatInt(now.Add(putAside).UnixMilli(), 10))
		}
		return time.Time{}, fmt.Errorf("fire schedule %s: %w", d.id, err)
	}
	done := time.Now()
	if len(times) > 1 || now.Sub(times[0]) > MisfireTolerance {
		log().Info("fired missed times", "count", len(times), "first", times[0], "last", times[last])
	}
	for i, j := range jobs {
		if debug {
			log().Debug("fired", "fire_at", times[i], "job_id", j.ID)
		}
		if s.cfg.OnFire != nil {
			s.cfg.OnFire(Fire{Schedule: d.id, Queue: d.queue, At: times[i], JobID: j.ID, Done: done})
		}
	}
	return nextT, nil
}

// advance moves d's next run to next ("" removes it) if it is still the
// planned one.
func (s *Scheduler) advance(ctx context.Context, k queueKeys, d due, next string) error {
	if err := scriptAdvance.Run(ctx, s.rdb, []string{k.next}, d.id, d.planned, next).Err(); err != nil {
		return fmt.Errorf("advance schedule %s: %w", d.id, err)
	}
	return nil
}

// refused reports whether err is an error reply of Redis about the command
// itself (a script error, say) rather than Redis being unreachable, loading,
// read-only or failing over.
func refused(err error) bool {
	var re redis.Error
	if !errors.As(err, &re) {
		return false
	}
	return !redis.IsLoadingError(err) && !redis.IsReadOnlyError(err) && !redis.IsClusterDownError(err) &&
		!redis.IsTryAgainError(err) && !redis.IsMasterDownError(err) && !strings.HasPrefix(re.Error(), "BUSY") &&
		!strings.HasPrefix(re.Error(), "NOSCRIPT") && !strings.HasPrefix(re.Error(), "OOM")
}
