package hatest_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sundialhq/sundial/internal/hatest"
	"github.com/sundialhq/sundial/internal/mongotest"
	"github.com/sundialhq/sundial/pkg/config"
	"github.com/sundialhq/sundial/pkg/history"
	"github.com/sundialhq/sundial/pkg/queue"
)

// TestSentinelFailover: the binaries run on a Sentinel-managed Redis (one
// master, two replicas, three sentinels, down-after 1000 ms) with the
// default SUNDIAL_REDIS_WAIT_REPLICAS (auto: every replica the master has
// connected), under steady load. The master is killed
// with SIGKILL and never comes back; Sentinel promotes a replica. Every job
// the API acknowledged, before or after, succeeds; the same processes keep
// serving (workers' blocking waits and cancel subscriptions, the poller's
// promotion and its wake-up subscription, the history writer's consumer
// group); the history records the jobs submitted after the failover.
func TestSentinelFailover(t *testing.T) {
	sn := hatest.StartSentinel(t)
	mongoURI, db := mongotest.Start(t)
	queues := []string{"ha-a", "ha-b"}
	s := startStack(t, sn.URL(), queues, 2,
		"SUNDIAL_REDIS_WAIT_TIMEOUT=500ms",
		"SUNDIAL_MONGO_URI="+mongoURI, "SUNDIAL_MONGO_DB="+db)

	l := &ledger{}
	stopLoad := s.load(queues, 20*time.Millisecond, l)
	hatest.Eventually(t, 30*time.Second, "steady load", func() bool { return len(l.snapshot()) >= 100 })

	old := sn.CurrentMaster()
	killed := time.Now()
	sn.Master.Kill()
	hatest.Eventually(t, 30*time.Second, "Sentinel promotes a replica", func() bool {
		m := sn.CurrentMaster()
		return m != "" && m != old
	})
	promoted := time.Since(killed)
	before := len(l.snapshot())
	hatest.Eventually(t, 30*time.Second, "submits acknowledged again after the failover", func() bool {
		return len(l.snapshot()) >= before+100
	})
	stopLoad()
	s.settle(l, 60*time.Second)
	s.alive()

	// The pub/sub wake-ups follow the new master: the poller listens for
	// earlier due times, each worker for cancels (go-redis resubscribes).
	ctx := context.Background()
	newMaster := redis.NewClient(&redis.Options{Addr: sn.CurrentMaster()})
	defer newMaster.Close()
	hatest.Eventually(t, 15*time.Second, "poller and workers subscribed on the new master", func() bool {
		n, err := newMaster.PubSubNumSub(ctx, "sundial:poller:wake", "sundial:cancel").Result()
		return err == nil && n["sundial:poller:wake"] >= 1 && n["sundial:cancel"] >= int64(len(s.workers))
	})

	// A job submitted now, with the load gone, is picked up at once: the
	// workers' blocking waits follow the new master.
	probeStart := time.Now()
	id, err := s.submit(queues[1], "probe", nil, l)
	if err != nil {
		t.Fatal(err)
	}
	hatest.Eventually(t, 10*time.Second, "the probe job succeeds", func() bool { return s.state(id) == "succeeded" })
	probe := time.Since(probeStart)

	// The history writer's consumer group lives on: every job, including
	// those submitted after the failover, reaches MongoDB.
	rdb, err := config.NewRedis(sn.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	mon := history.NewMonitor(queue.New(rdb, queue.Options{}), history.MonitorConfig{})
	hatest.Eventually(t, 60*time.Second, "the history writer catches up", func() bool {
		b, err := mon.Measure(ctx)
		return err == nil && b.Events == 0
	})
	mc, err := history.Connect(mongoURI)
	if err != nil {
		t.Fatal(err)
	}
	defer mc.Disconnect(ctx)
	store := history.NewStore(mc.Database(db), history.StoreOptions{})
	missing := 0
	for jid, a := range l.snapshot() {
		if a.at.Before(killed) {
			continue
		}
		j, err := store.Job(ctx, jid)
		if err != nil || j == nil || j.State != "succeeded" {
			missing++
		}
	}
	if missing > 0 {
		t.Errorf("%d jobs acknowledged after the failover are not succeeded in the history", missing)
	}
	role, _ := newMaster.Info(ctx, "replication").Result()
	t.Logf("%d jobs acknowledged, all succeeded; master killed, replica promoted after %v; probe job done in %v; new master: %s",
		len(l.snapshot()), promoted.Round(time.Millisecond), probe.Round(time.Millisecond), firstLine(role, "connected_slaves"))
	s.alive()
}

func firstLine(text, prefix string) string {
	for _, line := range strings.Split(text, "\r\n") {
		if strings.HasPrefix(line, prefix) {
			return line
		}
	}
	return ""
}
