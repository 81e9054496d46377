// Package runsink is a downstream system for tests of Sundial's binaries:
// sundial.http jobs POST to it, and it records each attempt's run outside
// Redis, by job and fencing token, so a test can check from outside that
// no two runs of one job overlapped in time.
package runsink

import (
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Sink is the downstream system: sundial.http jobs POST to its URL, and it records each attempt's run outside Redis — when it
// started and ended, by the job's id and the attempt's fencing token
// (headers Sundial-Job-Id and Sundial-Fencing-Token). It holds each request
// for the ms its URL asks (a short piece of work), and it fences as a
// store that takes the token would: a request whose token is older than one
// already seen for the job is refused (409), and one still held when a
// newer token arrives is aborted (409). Runs are the requests it answered
// 200 (committed) and those whose worker hung up half-way (stopped): no two
// of one job may overlap in time.
type Sink struct {
	srv *http.Server
	// URL is the sink's base URL; jobs POST to URL + "/run?ms=N".
	URL string

	mu      sync.Mutex
	newest  map[string]int64 // job → the highest fence seen
	runs    map[string][]run // job → its committed runs
	fenced  int              // requests refused or aborted for a newer token
	aborted map[string]chan struct{}
	// applied and reapplied are /apply's (apply.go).
	applied   map[string]int
	reapplied int
}

type run struct {
	fence      int64
	start, end time.Time
	stopped    bool // its worker hung up before the answer: not committed
}

// Start starts a sink on a free loopback port; the test's cleanup stops it.
func Start(t testing.TB) *Sink {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &Sink{URL: "http://" + ln.Addr().String(), newest: map[string]int64{}, runs: map[string][]run{}, aborted: map[string]chan struct{}{}, applied: map[string]int{}}
	mux := http.NewServeMux()
	mux.HandleFunc("/apply", s.serveApply)
	mux.HandleFunc("/", s.serve)
	s.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = s.srv.Serve(ln) }()
	t.Cleanup(func() { _ = s.srv.Close() })
	return s
}

// fenceOf reads the fence of a token "<fence>-<tag>".
func fenceOf(token string) (int64, bool) {
	f, _, ok := strings.Cut(token, "-")
	n, err := strconv.ParseInt(f, 10, 64)
	return n, ok && err == nil
}

func (s *Sink) serve(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	id := r.Header.Get("Sundial-Job-Id")
	fence, ok := fenceOf(r.Header.Get("Sundial-Fencing-Token"))
	if id == "" || !ok {
		http.Error(w, "no job id or fencing token", http.StatusBadRequest)
		return
	}
	ms, _ := strconv.Atoi(r.URL.Query().Get("ms"))
	key := id + "/" + strconv.FormatInt(fence, 10)
	s.mu.Lock()
	if fence < s.newest[id] {
		s.fenced++
		s.mu.Unlock()
		http.Error(w, "stale fencing token", http.StatusConflict)
		return
	}
	if fence > s.newest[id] {
		// A newer attempt: abort any older one still held.
		for k, ch := range s.aborted {
			if strings.HasPrefix(k, id+"/") {
				close(ch)
				delete(s.aborted, k)
			}
		}
		s.newest[id] = fence
	}
	abort := make(chan struct{})
	s.aborted[key] = abort
	s.mu.Unlock()

	t := time.NewTimer(time.Duration(ms) * time.Millisecond)
	defer t.Stop()
	select {
	case <-t.C:
	case <-r.Context().Done():
		// The attempt was stopped half-way: it ran until now all the same.
		s.forget(key, abort)
		s.mu.Lock()
		s.runs[id] = append(s.runs[id], run{fence: fence, start: start, end: time.Now(), stopped: true})
		s.mu.Unlock()
		return
	case <-abort:
		s.mu.Lock()
		s.fenced++
		s.mu.Unlock()
		http.Error(w, "a newer attempt took over", http.StatusConflict)
		return
	}
	s.mu.Lock()
	if s.newest[id] != fence {
		s.fenced++
		s.mu.Unlock()
		http.Error(w, "a newer attempt took over", http.StatusConflict)
		return
	}
	if s.aborted[key] == abort {
		delete(s.aborted, key)
	}
	s.runs[id] = append(s.runs[id], run{fence: fence, start: start, end: time.Now()})
	s.mu.Unlock()
	w.WriteHeader(http.StatusOK)
}

func (s *Sink) forget(key string, abort chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.aborted[key] == abort {
		delete(s.aborted, key)
	}
}

// Overlaps counts, over every job, the pairs of runs that overlap in time
// (reporting each to t), the runs committed, and the requests refused for a
// newer token.
func (s *Sink) Overlaps(t testing.TB) (n, committed, fenced int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, rs := range s.runs {
		rs = slices.Clone(rs)
		slices.SortFunc(rs, func(a, b run) int { return a.start.Compare(b.start) })
		for _, r := range rs {
			if !r.stopped {
				committed++
			}
		}
		for i := range rs {
			for j := i + 1; j < len(rs) && rs[j].start.Before(rs[i].end); j++ {
				n++
				t.Errorf("job %s: runs under fences %d and %d overlap (%v–%v and %v–%v)", id, rs[i].fence, rs[j].fence,
					rs[i].start.Format(time.StampMicro), rs[i].end.Format(time.StampMicro), rs[j].start.Format(time.StampMicro), rs[j].end.Format(time.StampMicro))
			}
		}
	}
	return n, committed, s.fenced
}

// Fences returns every fence a run was recorded under, over all jobs.
func (s *Sink) Fences() []int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []int64
	for _, rs := range s.runs {
		for _, r := range rs {
			out = append(out, r.fence)
		}
	}
	return out
}
