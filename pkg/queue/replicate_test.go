package queue_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sundialhq/sundial/pkg/job"
	"github.com/sundialhq/sundial/pkg/queue"
	"github.com/sundialhq/sundial/pkg/queue/queuetest"
)

// With WaitReplicas a submit returns only once a replica has the jobs, and
// fails with ErrNotReplicated (writing nothing twice on retry) when none
// acknowledges in time.
func TestSubmitWaitsForReplicas(t *testing.T) {
	t.Parallel()
	master, replica := startReplicated(t)
	ctx := context.Background()
	rc := replica.Client()
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

// A submit retried after ErrNotReplicated finds its job written (on the
// master only) and writes nothing: its WAIT must still confirm that a
// replica has the job. WAIT waits for its connection's own last write, so
// a pooled connection whose last write a replica acknowledged long ago
// answered at once (issue 32, finding 4).
func TestDuplicateSubmitWaitsForReplicasToo(t *testing.T) {
	t.Parallel()
	master, replica := startReplicated(t)
	ctx := context.Background()
	name := queuetest.Name("dup")
	opts := queue.Options{WaitReplicas: 1, WaitTimeout: 300 * time.Millisecond}
	// One connection each: the API process that retries, and the one whose
	// submit reached only the master.
	retrier := queue.New(redis.NewClient(&redis.Options{Addr: master.Addr(), PoolSize: 1}), opts)
	first := queue.New(redis.NewClient(&redis.Options{Addr: master.Addr(), PoolSize: 1}), opts)
	submit := func(q *queue.Client, key string) ([]queue.Submitted, error) {
		j, err := (&job.Spec{Queue: name, Type: "t", IdempotencyKey: key}).Build(time.Now())
		if err != nil {
			t.Fatal(err)
		}
		return q.Submit(ctx, []*job.Job{j})
	}
	if _, err := submit(retrier, "earlier"); err != nil {
		t.Fatalf("a submit with the replica in sync: %v", err)
	}
	replica.Pause() // connected, but acknowledges nothing
	t.Cleanup(replica.Resume)
	if _, err := submit(first, "once"); !errors.Is(err, queue.ErrNotReplicated) {
		t.Fatalf("submit with a frozen replica = %v, want ErrNotReplicated", err)
	}
	if _, err := submit(retrier, "once"); !errors.Is(err, queue.ErrNotReplicated) {
		t.Fatalf("the retried submit (a duplicate) with the replica still frozen = %v, want ErrNotReplicated", err)
	}
	replica.Resume()
	out, err := submit(retrier, "once")
	if err != nil || len(out) != 1 || !out[0].Duplicate {
		t.Fatalf("the retried submit with the replica back = %+v, %v; want the duplicate, confirmed", out, err)
	}
}

// WaitReplicasAuto waits for the replicas the master had (one here): a
// replica that is gone (cut off, killed) still counts, since a failover
// could promote it without the submits acknowledged meanwhile; they answer
// ErrNotReplicated until it is back. The binaries' default (issues 33 and
// 46).
func TestWaitReplicasAuto(t *testing.T) {
	t.Parallel()
	master, replica := startReplicated(t)
	ctx := context.Background()
	rc := replica.Client()
	q := queue.New(master.Client(), queue.Options{WaitReplicas: queue.WaitReplicasAuto, WaitTimeout: 300 * time.Millisecond})
	name := queuetest.Name("auto")
	submit := func() error {
		j, err := (&job.Spec{Queue: name, Type: "t"}).Build(time.Now())
		if err != nil {
			t.Fatal(err)
		}
		_, err = q.Submit(ctx, []*job.Job{j})
		return err
	}
	for i := range 10 {
		if err := submit(); err != nil {
			t.Fatalf("submit with a replica: %v", err)
		}
		if n := rc.LLen(ctx, "sundial:{"+name+"}:normal").Val(); n != int64(i+1) {
			t.Fatalf("after %d acknowledged submits the replica holds %d", i+1, n)
		}
	}
	replica.Pause() // connected, acknowledging nothing: a submit is refused
	if err := submit(); !errors.Is(err, queue.ErrNotReplicated) {
		t.Fatalf("submit with a frozen replica = %v, want ErrNotReplicated", err)
	}
	replica.Resume()
	replica.Kill() // gone (connected_slaves:0): still waited for
	queuetest.Eventually(t, 10*time.Second, "the master to report its replica gone", func() bool {
		info, _ := master.Client().Info(ctx, "replication").Result()
		return strings.Contains(info, "connected_slaves:0")
	})
	for range 10 {
		if err := submit(); !errors.Is(err, queue.ErrNotReplicated) {
			t.Fatalf("submit with the only replica gone = %v, want ErrNotReplicated (it would be lost in a failover to that replica)", err)
		}
	}
	replica.Restart()
	queuetest.Eventually(t, 20*time.Second, "a submit once the replica is back", func() bool { return submit() == nil })
}

// TestWaitReplicasAutoNone: a master that never had a replica (a single
// Redis) waits for none.
func TestWaitReplicasAutoNone(t *testing.T) {
	t.Parallel()
	srv := queuetest.Start(t)
	q := queue.New(srv.Client(), queue.Options{WaitReplicas: queue.WaitReplicasAuto, WaitTimeout: 300 * time.Millisecond})
	j, err := (&job.Spec{Queue: queuetest.Name("none"), Type: "t"}).Build(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q.Submit(context.Background(), []*job.Job{j}); err != nil {
		t.Fatalf("submit to a Redis without replicas: %v", err)
	}
}

// startReplicated starts a master and a replica of it, in sync.
func startReplicated(t *testing.T) (master, replica *queuetest.Server) {
	t.Helper()
	master = queuetest.Start(t)
	host, port, _ := net.SplitHostPort(master.Addr())
	replica = queuetest.StartWith(t, "--replicaof", host, port)
	rc := replica.Client()
	queuetest.Eventually(t, 20*time.Second, "replica in sync", func() bool {
		info, _ := rc.Info(context.Background(), "replication").Result()
		return strings.Contains(info, "master_link_status:up")
	})
	return master, replica
}

// A batch's seal waits for replicas as its members' submits do: a seal
// acknowledged on the master alone could be lost in a failover that keeps
// the members, leaving a batch answered 201 whose callbacks never fire.
func TestBatchSealWaitsForReplicas(t *testing.T) {
	t.Parallel()
	master, replica := startReplicated(t)
	ctx := context.Background()
	q := queue.New(master.Client(), queue.Options{WaitReplicas: queue.WaitReplicasAuto, WaitTimeout: 300 * time.Millisecond})
	name := queuetest.Name("bseal")
	j, err := (&job.Spec{Queue: name, Type: "t"}).Build(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	id := queuetest.Name("b")
	if _, _, err := q.CreateBatch(ctx, queue.BatchSpec{ID: id, Jobs: []*job.Job{j}, Open: true}); err != nil {
		t.Fatalf("an open batch with its member: %v", err)
	}
	replica.Pause() // connected, acknowledging nothing
	_, _, err = q.AddToBatch(ctx, id, nil, true)
	if !errors.Is(err, queue.ErrNotReplicated) {
		t.Fatalf("a seal no replica acknowledged = %v, want ErrNotReplicated", err)
	}
	replica.Resume()
	// Sealing again (the client's retry) is acknowledged once replicated.
	queuetest.Eventually(t, 10*time.Second, "the seal acknowledged and replicated", func() bool {
		if _, _, err := q.AddToBatch(ctx, id, nil, true); err != nil && !errors.Is(err, queue.ErrBatchSealed) {
			return false
		}
		return replica.Client().HGet(ctx, "sundial:{batch."+id+"}:meta", "sealed").Val() == "1"
	})
}
