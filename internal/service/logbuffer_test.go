package service

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/sundialhq/sundial/internal/logbuf"
)

func TestLogBufferHoldsInfoLinesBriefly(t *testing.T) {
	var out logbuf.Buffer
	b := newLogBuffer(&out)
	log := slog.New(flushOnWarn{slog.NewTextHandler(b, nil), b}).With("service", "test")
	start := time.Now()
	log.Info("first")
	log.Info("second")
	if got := out.String(); got != "" {
		t.Fatalf("info lines written at once: %q", got)
	}
	// They come out by themselves, after about LogFlushInterval.
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(out.String(), "msg=second") {
		if time.Now().After(deadline) {
			t.Fatalf("info lines not written within 5 s: %q", out.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	if waited := time.Since(start); waited < LogFlushInterval/2 {
		t.Errorf("written after %v, before the flush interval", waited)
	}
	if strings.Index(out.String(), "msg=first") > strings.Index(out.String(), "msg=second") {
		t.Errorf("lines out of order: %q", out.String())
	}
}

func TestLogBufferWritesWarningsAtOnceWithWhatCameBefore(t *testing.T) {
	var out logbuf.Buffer
	b := newLogBuffer(&out)
	log := slog.New(flushOnWarn{slog.NewTextHandler(b, nil), b}).With("service", "test").WithGroup("g")
	log.Info("context")
	log.Warn("trouble")
	got := out.String()
	if !strings.Contains(got, "msg=context") || !strings.Contains(got, "msg=trouble") {
		t.Fatalf("a warning did not write itself and the line before it at once: %q", got)
	}
	log.Error("worse")
	if !strings.Contains(out.String(), "msg=worse") {
		t.Fatalf("an error was held back: %q", out.String())
	}
}

func TestLogBufferWritesWhenFull(t *testing.T) {
	var out logbuf.Buffer
	b := newLogBuffer(&out)
	line := strings.Repeat("x", 1000) + "\n"
	for range logFlushBytes/len(line) + 1 {
		if _, err := b.Write([]byte(line)); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(out.String()); n < logFlushBytes {
		t.Fatalf("a full buffer held %d bytes back (wrote %d)", logFlushBytes, n)
	}
	b.Flush()
	if n := len(out.String()); n != (logFlushBytes/len(line)+1)*len(line) {
		t.Fatalf("flush wrote %d bytes in all", n)
	}
}
