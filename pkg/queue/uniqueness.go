package queue

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/sundialhq/sundial/pkg/job"
)

// Uniqueness is how a queue's idempotency keys make submits unique: a
// submit whose key names an earlier job returns that job and creates
// nothing, for Window after the earlier submit — or, with UntilFinished,
// only while that job has not ended (succeeded, dead or cancelled) and
// within Window: "one at a time" rather than "once a day".
type Uniqueness struct {
	// Window is how long a key names its job; 0 means the client's
	// Options.IdempotencyWindow (24 h by default). 1 s to 90 days.
	Window time.Duration `json:"-"`
	// UntilFinished frees the key once its job ended.
	UntilFinished bool `json:"until_finished"`
}

// MaxUniquenessWindow bounds Uniqueness.Window.
const MaxUniquenessWindow = 90 * 24 * time.Hour

// Check validates u.
func (u Uniqueness) Check() error {
	if u.Window != 0 && (u.Window < time.Second || u.Window > MaxUniquenessWindow) {
		return &job.FieldError{Field: "window_seconds", Message: fmt.Sprintf("window_seconds must be between 1 and %d", int(MaxUniquenessWindow.Seconds()))}
	}
	return nil
}

// SetUniqueness sets queue's uniqueness rules (a zero u restores the
// defaults); they apply from the next submit.
func (c *Client) SetUniqueness(ctx context.Context, queue string, u Uniqueness) error {
	if err := u.Check(); err != nil {
		return err
	}
	key := c.keysFor(queue).tag + "uniqueness"
	if u == (Uniqueness{}) {
		return c.rdb.Del(ctx, key).Err()
	}
	pipe := c.rdb.TxPipeline()
	pipe.Del(ctx, key)
	if u.Window > 0 {
		pipe.HSet(ctx, key, "window", u.Window.Milliseconds())
	}
	if u.UntilFinished {
		pipe.HSet(ctx, key, "until", "finished")
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("uniqueness: %w", err)
	}
	return c.register(ctx, queue)
}

// GetUniqueness returns queue's uniqueness rules, with the window in
// force (the client's default when the queue sets none).
func (c *Client) GetUniqueness(ctx context.Context, queue string) (Uniqueness, error) {
	r, err := c.rdb.HMGet(ctx, c.keysFor(queue).tag+"uniqueness", "window", "until").Result()
	if err != nil {
		return Uniqueness{}, fmt.Errorf("uniqueness: %w", err)
	}
	u := Uniqueness{Window: c.opts.IdempotencyWindow}
	if s, _ := r[0].(string); s != "" {
		if ms, err := strconv.ParseInt(s, 10, 64); err == nil {
			u.Window = time.Duration(ms) * time.Millisecond
		}
	}
	u.UntilFinished = r[1] == "finished"
	return u, nil
}
