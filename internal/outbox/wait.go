package outbox

import (
	"context"
	"errors"
	"time"

	"github.com/sundialhq/sundial"
)

// Wait waits until the job with id is relayed (until then c.Wait answers
// ErrNotFound) and then until it ends, or until ctx ends; it returns the
// ended job.
func Wait(ctx context.Context, c *sundial.Client, id string) (*sundial.Record, error) {
	delay := 5 * time.Millisecond
	for {
		j, err := c.Wait(ctx, id)
		if !errors.Is(err, sundial.ErrNotFound) {
			return j, err
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
		delay = min(2*delay, 200*time.Millisecond)
	}
}
