package schedule

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sundialhq/sundial/internal/hatest"
	"github.com/sundialhq/sundial/pkg/queue"
)

// TestClusterScheduleScriptsKeepToOneSlot stores and fires schedules of
// queues on all three shards of a real Redis Cluster, with a leader whose
// lock is renewed and released, so that every script in lua/ runs there:
// Redis refuses a script touching a key on another node than its KEYS, and
// the keys left behind must all be global or in their queue's slot. A
// script added to lua/ that this scenario does not run fails the test.
func TestClusterScheduleScriptsKeepToOneSlot(t *testing.T) {
	cl := hatest.StartCluster(t)
	rdb := cl.Client()
	log := &hatest.ScriptLog{}
	rdb.AddHook(log)
	q := queue.New(rdb, queue.Options{})
	st := NewStore(q)
	ctx := context.Background()

	var queues []string
	for i, on := range cl.QueuesOnShards("schedslot", 1) {
		every := 1
		_, _, err := st.Put(ctx, &Schedule{ID: fmt.Sprintf("slot-%d", i), EverySeconds: &every, Job: JobTemplate{Queue: on[0], Type: "t"}})
		if err != nil {
			t.Fatalf("put a schedule on %s: %v", on[0], err)
		}
		// A planned run without a definition is removed: advance.lua.
		if err := rdb.ZAdd(ctx, keysFor(on[0]).next, redisZ(time.Now().Add(-time.Minute), fmt.Sprintf("orphan-%d", i))).Err(); err != nil {
			t.Fatal(err)
		}
		queues = append(queues, on[0])
	}
	renew, _ := luaFS.ReadFile("lua/renew.lua")
	s := NewScheduler(q, SchedulerConfig{LockTTL: time.Second, RenewInterval: 50 * time.Millisecond, MaxSleep: 100 * time.Millisecond})
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- s.Run(runCtx) }()
	hatest.Eventually(t, 20*time.Second, "every shard's schedule fired and the leader lock renewed", func() bool {
		stats, err := q.Stats(ctx, queues...)
		if err != nil {
			return false
		}
		for _, qs := range stats {
			if qs.SubmittedTotal < 2 { // fired, advanced, fired again
				return false
			}
		}
		return log.Ran(string(renew))
	})
	cancel()
	if err := <-done; err != nil && err != context.Canceled {
		t.Fatalf("scheduler: %v", err)
	}

	files, err := luaFS.ReadDir("lua")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		b, _ := luaFS.ReadFile("lua/" + f.Name())
		if !log.Ran(string(b)) {
			t.Errorf("lua/%s did not run on the cluster: extend this test's scenario to run it", f.Name())
		}
	}
	err = rdb.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
		iter := m.Scan(ctx, 0, "*", 1000).Iterator()
		for iter.Next(ctx) {
			k := iter.Val()
			// The storage format's registry has its own tag (docs/engine.md).
			ok := !strings.Contains(k, "{") || strings.HasPrefix(k, "sundial:{.storage}:")
			for _, name := range queues {
				ok = ok || strings.Contains(k, "{"+name+"}")
			}
			if !ok {
				t.Errorf("key %q carries a hash tag but not its queue's", k)
			}
		}
		return iter.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
}
