// Package deadline runs a check under a context's deadline even when the
// check does not honour it, for the readiness probes of every binary.
package deadline

import "context"

// Within returns check's error, or ctx's once ctx ends first: a client
// need not honour the deadline (go-redis reads a reply for up to its
// ReadTimeout, 5 s, whatever the context), and the check then finishes in
// the background.
func Within(ctx context.Context, check func(context.Context) error) error {
	done := make(chan error, 1)
	go func() { done <- check(ctx) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}
