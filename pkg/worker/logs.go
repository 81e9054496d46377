package worker

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/sundialhq/sundial/pkg/queue"
)

// Job logs (docs/concepts.md, "Job logs"): the lines a handler logs with
// Logger(ctx) are kept with its job (queue.AppendLogs), shown on the job
// page live and read with GET /v1/jobs/{id}/logs. They are buffered and
// sent at most logFlushEvery after the first line of a batch, at
// queue.MaxLogLinesPerCall lines, and when the handler returns, before its
// outcome: a line logged by an attempt that still held its lease is kept.
// A line the engine refuses (the lease was lost) is dropped silently; the
// handler is never blocked on Redis by a log line.

// logFlushEvery bounds how long a logged line waits to be sent.
const logFlushEvery = 200 * time.Millisecond

// jobLog is one attempt's buffer of log lines.
type jobLog struct {
	sending sync.Mutex // held by the one flush that sends
	mu      sync.Mutex
	buf     []queue.LogEntry
	timer   *time.Timer
	// send keeps lines; nil for a handler run without Redis (HandlerContext),
	// whose lines go nowhere.
	send func(ctx context.Context, lines []queue.LogEntry)
}

// add buffers a line and arranges for it to be sent.
func (l *jobLog) add(e queue.LogEntry) {
	if l.send == nil {
		return
	}
	l.mu.Lock()
	l.buf = append(l.buf, e)
	full := len(l.buf) >= queue.MaxLogLinesPerCall
	if !full && l.timer == nil {
		l.timer = time.AfterFunc(logFlushEvery, func() { l.flush(context.Background()) })
	}
	l.mu.Unlock()
	if full {
		go l.flush(context.Background())
	}
}

// flush sends the buffered lines, in order: one flush at a time, and the
// buffer taken whole under the lock that add holds only briefly, so a
// handler logging meanwhile never waits for Redis.
func (l *jobLog) flush(ctx context.Context) {
	if l.send == nil {
		return
	}
	l.sending.Lock()
	defer l.sending.Unlock()
	l.mu.Lock()
	buf := l.buf
	l.buf = nil
	if l.timer != nil {
		l.timer.Stop()
		l.timer = nil
	}
	l.mu.Unlock()
	for len(buf) > 0 {
		n := min(len(buf), queue.MaxLogLinesPerCall)
		l.send(ctx, buf[:n])
		buf = buf[n:]
	}
}

// Logger returns a logger whose lines are kept with the job whose handler
// received ctx (levels debug, info, warn, error; attributes become the
// line's fields, at most queue.MaxLogFields, values as text). Outside a
// handler it returns a logger that discards.
func Logger(ctx context.Context) *slog.Logger {
	rj, ok := ctx.Value(runningKey{}).(*runningJob)
	if !ok {
		return slog.New(slog.DiscardHandler)
	}
	return slog.New(&logHandler{log: &rj.logs})
}

// logHandler is the slog.Handler of Logger.
type logHandler struct {
	log    *jobLog
	attrs  []slog.Attr
	prefix string // the open groups, "a.b."
}

func (h *logHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h *logHandler) Handle(_ context.Context, r slog.Record) error {
	e := queue.LogEntry{Level: levelName(r.Level), Message: r.Message}
	add := func(prefix string, a slog.Attr) bool {
		if len(e.Fields) == queue.MaxLogFields {
			return false
		}
		if e.Fields == nil {
			e.Fields = map[string]string{}
		}
		e.Fields[prefix+a.Key] = a.Value.Resolve().String()
		return true
	}
	for _, a := range h.attrs {
		add("", a) // named with their groups by WithAttrs
	}
	r.Attrs(func(a slog.Attr) bool { return add(h.prefix, a) })
	h.log.add(e)
	return nil
}

func (h *logHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	c := *h
	c.attrs = append(append([]slog.Attr{}, h.attrs...), attrs...)
	for i := len(h.attrs); i < len(c.attrs); i++ {
		c.attrs[i].Key = h.prefix + c.attrs[i].Key
	}
	return &c
}

func (h *logHandler) WithGroup(name string) slog.Handler {
	c := *h
	c.prefix = h.prefix + name + "."
	return &c
}

// levelName maps a slog level to a log line's level.
func levelName(l slog.Level) string {
	switch {
	case l < slog.LevelInfo:
		return "debug"
	case l < slog.LevelWarn:
		return "info"
	case l < slog.LevelError:
		return "warn"
	}
	return "error"
}

// sendLogs is jobLog.send for an attempt run by w.
func (w *Worker) sendLogs(r *running) func(ctx context.Context, lines []queue.LogEntry) {
	return func(ctx context.Context, lines []queue.LogEntry) {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		if _, err := w.q.AppendLogs(ctx, r.queue, r.lease, lines); err != nil && err != queue.ErrLeaseLost {
			w.log.Debug("job log lines not kept", "job", r.lease.Job.ID, "lines", len(lines), "err", fmt.Sprint(err))
		}
	}
}
