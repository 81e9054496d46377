package e2e

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sundialhq/sundial/internal/proctest"
	"github.com/sundialhq/sundial/pkg/job"
	"github.com/sundialhq/sundial/pkg/queue"
	"github.com/sundialhq/sundial/pkg/queue/queuetest"
)

// TestStorageFormatGate runs the API, worker and poller against a Redis
// whose storage format marker names a format this release does not read:
// each refuses to run, at start and when the marker moves while it runs
// (docs/engine.md, "Storage format"). Before the marker moves, all three
// are registered readers and run jobs.
func TestStorageFormatGate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	services := []string{"api", "worker", "poller"}
	start := func(srv *queuetest.Server) map[string]*proctest.Proc {
		env := serviceEnv(srv, "SUNDIAL_HISTORY=off")
		procs := map[string]*proctest.Proc{}
		for _, name := range services {
			procs[name] = startProc(t, binary(t, name), append(env, "SUNDIAL_HTTP_ADDR="+proctest.FreeAddr(t))...)
		}
		return procs
	}
	refused := func(procs map[string]*proctest.Proc, format string) {
		t.Helper()
		for _, name := range services {
			p := procs[name]
			select {
			case <-p.Done():
			case <-time.After(60 * time.Second):
				t.Fatalf("the %s still runs against storage format %s", name, format)
			}
			if code := p.ExitCode(); code != 1 || !strings.Contains(p.Output(), "storage format "+format) {
				t.Fatalf("the %s exited %d; want 1, saying the format (output:\n%s)", name, code, p.Output())
			}
		}
	}

	// At start.
	srv := queuetest.Start(t)
	unread := strconv.Itoa(queue.WriteFormat + 1)
	srv.Client().HSet(ctx, "sundial:{.storage}:format", "format", unread)
	refused(start(srv), unread)
	if n := srv.Client().ZCard(ctx, "sundial:{.storage}:readers").Val(); n != 0 {
		t.Fatalf("%d refused processes are registered", n)
	}

	// While running.
	srv = queuetest.Start(t)
	rdb := srv.Client()
	q := queue.New(rdb, queue.Options{})
	procs := start(srv)
	queuetest.Eventually(t, 30*time.Second, "API, worker and poller registered", func() bool {
		st, err := q.Storage(ctx, time.Minute)
		if err != nil {
			return false
		}
		var roles []string
		for _, r := range st.Readers {
			roles = append(roles, r.Role)
		}
		slices.Sort(roles)
		return slices.Equal(roles, []string{"api", "poller", "worker"})
	})
	ran := submit(t, q, []job.Spec{{Type: "sundial.echo", Payload: json.RawMessage(`{"x":1}`)}})[0]
	queuetest.Eventually(t, 30*time.Second, "the job to run", func() bool {
		j, err := q.Get(ctx, ran.ID)
		return err == nil && j.State == job.Succeeded
	})
	rdb.HSet(ctx, "sundial:{.storage}:format", "format", "7")
	refused(procs, "7")
	if n := rdb.ZCard(ctx, "sundial:{.storage}:readers").Val(); n != 0 {
		t.Fatalf("%d refused processes are still registered", n)
	}
}
