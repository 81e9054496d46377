package queue

import "context"

// Counts returns one queue's counts (QueueStats without
// ProcessedPerSecond, which stays 0) in one pipelined round trip of nine
// commands: the cheap way to ask how a queue is doing. A queue that never
// had a job reports zeros.
func (c *Client) Counts(ctx context.Context, queue string) (QueueStats, error) {
	st, err := c.stats(ctx, []string{queue}, 0)
	if err != nil {
		return QueueStats{}, err
	}
	return st[0], nil
}
