package deadline

import (
	"context"
	"errors"
	"testing"
	"time"
)

// A check that ignores its context is abandoned at the deadline; one that
// answers in time gives its own result.
func TestWithin(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := Within(ctx, func(context.Context) error { <-release; return nil })
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 2*time.Second {
		t.Fatalf("a hung check: %v after %v", err, time.Since(start))
	}
	boom := errors.New("boom")
	if err := Within(context.Background(), func(context.Context) error { return boom }); err != boom {
		t.Fatalf("a check that answers: %v", err)
	}
}
