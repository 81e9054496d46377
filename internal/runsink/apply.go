package runsink

import (
	"net/http"
	"strings"
)

// Steps of durable jobs (docs/durable.md) make their side effects at the
// sink's /apply?key=K&job=ID&token=T: it refuses a request whose fencing
// token is older than one it saw for the job (a stale attempt), and
// applies each idempotency key once, answering a key applied before with
// its value ("v:" + key) — the retry of a step whose attempt died after
// the side effect, before its record. Applied tells how often each key
// was applied: never more than once.

// serveApply handles /apply.
func (s *Sink) serveApply(w http.ResponseWriter, r *http.Request) {
	key, id := r.URL.Query().Get("key"), r.URL.Query().Get("job")
	fence, ok := fenceOf(r.URL.Query().Get("token"))
	if key == "" || id == "" || !ok {
		http.Error(w, "want key, job and token", http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if fence < s.newest[id] {
		s.fenced++
		http.Error(w, "stale fencing token", http.StatusConflict)
		return
	}
	s.newest[id] = fence
	if s.applied[key] > 0 {
		s.reapplied++
	} else {
		s.applied[key]++
	}
	_, _ = w.Write([]byte("v:" + key))
}

// Applied returns how many times each key was applied, the requests for
// keys applied before (answered with their value), and the requests
// refused for an older token.
func (s *Sink) Applied() (applied map[string]int, again, fenced int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]int, len(s.applied))
	for k, n := range s.applied {
		out[k] = n
	}
	return out, s.reapplied, s.fenced
}

// AppliedWithPrefix counts the keys applied that start with prefix.
func (s *Sink) AppliedWithPrefix(prefix string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for k := range s.applied {
		if strings.HasPrefix(k, prefix) {
			n++
		}
	}
	return n
}
