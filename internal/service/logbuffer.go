package service

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"time"
)

// LogFlushInterval is how long a log line of level info or debug may wait
// in a service's buffer before it is written out.
const LogFlushInterval = 100 * time.Millisecond

// logFlushBytes is how much the buffer holds before it is written out at once.
const logFlushBytes = 32 << 10

// logBuffer holds log lines and writes them to w together: at most
// LogFlushInterval after the first line it holds, at once when it holds
// logFlushBytes, and on Flush. One write(2) per request line was ~7 % of
// the API's CPU per single submit at 16 connections (the access log;
// docs/benchmarks/2026-11-28-submit.md). Lines of level warn and above are
// written at once (flushOnWarn), so what explains a failure is never held
// back; a process killed with -9 loses at most LogFlushInterval of info
// lines.
type logBuffer struct {
	mu    sync.Mutex
	w     io.Writer
	buf   []byte
	timer *time.Timer // armed while the buffer holds lines
}

func newLogBuffer(w io.Writer) *logBuffer { return &logBuffer{w: w} }

// Write appends p, one whole log record (slog's handlers write one per
// record).
func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if len(b.buf) >= logFlushBytes {
		b.flushLocked()
	} else if b.timer == nil {
		b.timer = time.AfterFunc(LogFlushInterval, b.Flush)
	}
	return len(p), nil
}

// Flush writes out what the buffer holds.
func (b *logBuffer) Flush() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.flushLocked()
}

func (b *logBuffer) flushLocked() {
	if b.timer != nil {
		b.timer.Stop()
		b.timer = nil
	}
	if len(b.buf) == 0 {
		return
	}
	// A failed write loses the lines: there is nowhere else to say so.
	_, _ = b.w.Write(b.buf)
	if cap(b.buf) > 4*logFlushBytes {
		b.buf = nil // a burst's big buffer is not kept
	} else {
		b.buf = b.buf[:0]
	}
}

// flushOnWarn is a slog handler that writes a record of level warn or above
// out at once, with the lines before it.
type flushOnWarn struct {
	slog.Handler
	buf *logBuffer
}

func (h flushOnWarn) Handle(ctx context.Context, r slog.Record) error {
	err := h.Handler.Handle(ctx, r)
	if r.Level >= slog.LevelWarn {
		h.buf.Flush()
	}
	return err
}

func (h flushOnWarn) WithAttrs(attrs []slog.Attr) slog.Handler {
	return flushOnWarn{h.Handler.WithAttrs(attrs), h.buf}
}

func (h flushOnWarn) WithGroup(name string) slog.Handler {
	return flushOnWarn{h.Handler.WithGroup(name), h.buf}
}
