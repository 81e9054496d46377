package queue_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/sundialhq/sundial/pkg/job"
	"github.com/sundialhq/sundial/pkg/queue"
	"github.com/sundialhq/sundial/pkg/queue/queuetest"
)

// With WaitReplicas a submit returns only once a replica has the jobs, and
// fails with ErrNotReplicated (writing nothing twice on retry) when none
// acknowledges in time.
func TestSubmitWaitsForReplicas(t *testing.T) {
	t.Parallel()
	master := queuetest.Start(t)
	host, port, _ := net.SplitHostPort(master.Addr())
	replica := queuetest.StartWith(t, "--replicaof", host, port)
	ctx := context.Background()
	rc := replica.Client()
	queuetest.Eventually(t, 20*time.Second, "replica in sync", func() bool {
		info, _ := rc.Info(ctx, "replication").Result()
		return strings.Contains(info, "master_link_status:up")
	})
	q := queue.New(master.Client(), queue.Options{WaitReplicas: 1, WaitTimeout: 300 * time.Millisecond})
	name := queuetest.Name("wait")
	submit := func(key string) error {
		spec := job.Spec{Queue: name, Type: "t", IdempotencyKey: key}
		j, err := spec.Build(time.Now())
		if err != nil {
			t.Fatal(err)
		}
		_, err = q.Submit(ctx, []*job.Job{j})
		return err
	}
	for i := range 20 {
		if err := submit("k" + string(rune('a'+i))); err != nil {
			t.Fatalf("submit with a live replica: %v", err)
		}
		// Acknowledged means on the replica now, not eventually.
		n, err := rc.LLen(ctx, "sundial:{"+name+"}:normal").Result()
		if err != nil {
			t.Fatal(err)
		}
		if n != int64(i+1) {
			t.Fatalf("after %d acknowledged submits the replica holds %d", i+1, n)
		}
	}
	replica.Kill()
	start := time.Now()
	err := submit("lonely")
	if !errors.Is(err, queue.ErrNotReplicated) {
		t.Fatalf("submit without a replica = %v, want ErrNotReplicated", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("WAIT took %v with a 300 ms timeout", d)
	}
}
