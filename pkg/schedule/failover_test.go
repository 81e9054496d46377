package schedule

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sundialhq/sundial/pkg/queue"
	"github.com/sundialhq/sundial/pkg/queue/queuetest"
)

// childEnv, when set to a Redis address, makes the test binary run one
// scheduler instead of the tests (see TestMain), named by childIDEnv.
const (
	childEnv   = "SUNDIAL_SCHEDULE_TEST_REDIS"
	childIDEnv = "SUNDIAL_SCHEDULE_TEST_ID"
)

// runChild runs a scheduler until it is killed or gets SIGTERM.
func runChild() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv(childEnv)})
	s := NewScheduler(queue.New(rdb, queue.Options{}), SchedulerConfig{ID: os.Getenv(childIDEnv), Fire: FireClient(rdb, queue.Options{})})
	fmt.Println("started", s.ID())
	err := s.Run(ctx)
	rdb.Close()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(0)
}

// startChild starts a scheduler process named id against srv.
func startChild(t *testing.T, srv *queuetest.Server, id string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+srv.Addr(), childIDEnv+"="+id)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "started") {
		t.Fatalf("child %s: %q %v", id, line, err)
	}
	go io.Copy(io.Discard, out)
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return cmd
}

// TestFailoverFiresEveryTimeOnce runs two scheduler processes against one
// Redis, kills the leader with SIGKILL, and checks over the whole window
// that every fire time of an every-second schedule fired exactly once: the
// follower takes over within the lock's TTL and catches up the fire times
// the failover missed (misfire run_all).
func TestFailoverFiresEveryTimeOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes and runs for ~10 s")
	}
	e := newEnv(t, false)
	const q = "failover"
	e.put(t, `{"id": "tick", "every_seconds": 1, "misfire": "run_all", "job": {"queue": "failover", "type": "tick"}}`)
	rdb := e.q.Redis()
	leader := func() string { return rdb.Get(e.ctx, keyLeader).Val() }
	fired := func() int { return len(e.jobs(t, q)) }

	a := startChild(t, e.srv, "A")
	queuetest.Eventually(t, 5*time.Second, "A leads", func() bool { return leader() == "A" })
	startChild(t, e.srv, "B")
	queuetest.Eventually(t, 10*time.Second, "A fires 3 times", func() bool { return fired() >= 3 })

	if err := a.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	_ = a.Wait()
	t.Logf("A fired %d times before it was killed", fired())
	queuetest.Eventually(t, 10*time.Second, "B takes over", func() bool { return leader() == "B" })
	takeover := time.Since(killed)
	tookOver := time.Now()
	queuetest.Eventually(t, 10*time.Second, "B fires for 3 s", func() bool {
		s, err := e.st.Get(e.ctx, "tick")
		return err == nil && s.LastRunAt != nil && s.LastRunAt.After(tookOver.Add(3*time.Second))
	})
	t.Logf("leader killed; B took over after %v", takeover.Round(time.Millisecond))
	if takeover > 6*time.Second { // TTL 3 s + one acquire interval (1 s) + slack for a loaded machine
		t.Errorf("takeover took %v, want within the lock TTL (3 s) plus one acquire interval", takeover)
	}

	// Stop firing, then count: one job per second from the first fire time
	// to the last, none missing, none twice.
	if _, err := e.st.SetEnabled(e.ctx, "tick", false); err != nil {
		t.Fatal(err)
	}
	times := e.fireTimes(t, q)
	var first, last time.Time
	for at, n := range times {
		if n != 1 {
			t.Errorf("fire time %v fired %d times", at, n)
		}
		if first.IsZero() || at.Before(first) {
			first = at
		}
		if at.After(last) {
			last = at
		}
	}
	want := int(last.Sub(first)/time.Second) + 1
	if len(times) != want {
		t.Errorf("%d fire times between %v and %v, want %d (one per second)", len(times), first, last, want)
	}
	t.Logf("%d fire times, each once, across the failover", len(times))
}
