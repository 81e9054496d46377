package queue

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sundialhq/sundial/pkg/job"
)

// A submit's command is one slice sized up front: a call whose jobs share
// one profile fills it exactly (no copy into a larger one), and the queue's
// keys and prefixes are not boxed again per call.
func TestSubmitCommandIsBuiltInOneSlice(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never dialled
	defer rdb.Close()
	c := New(rdb, Options{})
	k := c.keysFor("cmd")
	now := time.Now()
	for _, n := range []int{1, 2, 50, 1000} {
		jobs := make([]*job.Job, n)
		idx := make([]int, n)
		for i := range jobs {
			sp := job.Spec{Queue: "cmd", Type: "t", Payload: []byte(`{"i":1}`)}
			j, err := sp.Build(now)
			if err != nil {
				t.Fatal(err)
			}
			jobs[i], idx[i] = j, i
		}
		cmd := c.submitCommand(k, jobs, idx, false, nil, "4")
		if len(cmd) != cap(cmd) {
			t.Errorf("%d jobs: command of %d arguments in a slice of %d", n, len(cmd), cap(cmd))
		}
		if cmd[0] != "fcall" || cmd[1] != c.scripts.submit.fn || cmd[2] != 1 || cmd[3] != k.all[kHigh] || cmd[4] != k.jobPrefix {
			t.Errorf("%d jobs: command starts %v", n, cmd[:4])
		}
		if n == 1 {
			// The slice, the clock, the idempotency window, the profile's
			// fields and the job's: ~14 today; the keys alone were 13 more.
			allocs := testing.AllocsPerRun(100, func() { c.submitCommand(k, jobs, idx, false, nil, "4") })
			if allocs > 18 {
				t.Errorf("a one-job submit command takes %.0f allocations, want at most 18", allocs)
			}
		}
	}
}
