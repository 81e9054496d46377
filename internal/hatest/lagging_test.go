package hatest_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/sundialhq/sundial/internal/hatest"
	"github.com/sundialhq/sundial/internal/runsink"
)

// TestSentinelFailoverToALaggingReplica: the replicas fall behind (their
// replication links stall while they stay up, so Sentinel still counts
// them) and the master dies; Sentinel promotes a replica that lacks the
// master's last writes: acknowledgements, claims, lease renewals. With the
// default SUNDIAL_REDIS_WAIT_REPLICAS (auto) no acknowledged job is lost;
// and no job runs twice at once, though the new master forgot leases the
// old one granted: it claims nothing for a lease TTL, by when their holders
// stopped. Runs are recorded outside Redis by a sink the jobs call (issue
// 32, the lagging failover fault).
func TestSentinelFailoverToALaggingReplica(t *testing.T) {
	sn := hatest.StartLaggingSentinel(t)
	sink := runsink.Start(t)
	queues := []string{"lag-a", "lag-b"}
	s := startStack(t, sn.URL(), queues, 2,
		"SUNDIAL_REDIS_WAIT_TIMEOUT=500ms", "SUNDIAL_HISTORY=off", "SUNDIAL_HTTP_JOB_ALLOW=127.0.0.1")
	l := &ledger{}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for p := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Producer 0 submits runs of 2.5 s, which the failover catches
			// half-way; the others short ones.
			every, ms := 20*time.Millisecond, func(n int) int { return 20 + (n*37)%130 }
			if p == 0 {
				every, ms = 150*time.Millisecond, func(int) int { return 2500 }
			}
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				case <-time.After(every):
				}
				spec := map[string]any{"type": "sundial.http", "backoff": map[string]any{"base_seconds": 0.05, "max_seconds": 0.2},
					"payload": map[string]any{"method": "POST", "url": fmt.Sprintf("%s/run?ms=%d", sink.URL, ms(n))}}
				// A submit refused while no replica acknowledges is retried
				// with its idempotency key until it is acknowledged.
				for {
					if _, err := s.submit(queues[n%2], fmt.Sprintf("p%d-%d", p, n), spec, l); err == nil {
						break
					}
					select {
					case <-stop:
						return
					default:
					}
				}
			}
		}()
	}
	hatest.Eventually(t, 30*time.Second, "steady load", func() bool { return len(l.snapshot()) >= 100 })

	old := sn.CurrentMaster()
	for _, link := range sn.Links {
		link.Stall() // the replicas fall behind
	}
	lagged := len(l.snapshot())
	time.Sleep(400 * time.Millisecond) //nolint // the lag: the master runs ahead of its replicas this long
	sn.Master.Kill()
	for _, link := range sn.Links {
		link.Cut() // what the replicas had not received is lost with the master
		link.Heal()
	}
	hatest.Eventually(t, 30*time.Second, "Sentinel promotes a replica", func() bool {
		m := sn.CurrentMaster()
		return m != "" && m != old
	})
	hatest.Eventually(t, 60*time.Second, "submits acknowledged again after the failover", func() bool {
		return len(l.snapshot()) >= lagged+100
	})
	close(stop)
	wg.Wait()
	s.settle(l, 90*time.Second)
	s.alive()
	overlaps, committed, fenced := sink.Overlaps(t)
	t.Logf("%d jobs acknowledged, all succeeded; %d runs committed at the sink, %d stale attempts refused, %d overlapping",
		len(l.snapshot()), committed, fenced, overlaps)
	if overlaps > 0 {
		t.Fatalf("%d pairs of runs of one job overlapped across the failover", overlaps)
	}
	// Nor did the sink have to refuse a stale writer to prevent one.
	if fenced > 0 {
		t.Fatalf("the sink refused %d stale attempts: a second run started while the first still ran", fenced)
	}
}
