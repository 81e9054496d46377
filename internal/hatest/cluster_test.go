package hatest_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sundialhq/sundial/internal/hatest"
)

// TestClusterFailoverAndMigration: the binaries on a 3-master, 3-replica
// Redis Cluster with SUNDIAL_REDIS_WAIT_REPLICAS=1, under steady load over
// six queues, two on each shard. The registry of queues, workers and
// schedules spans the shards; a dependency on another queue's job is
// refused with a 400. One shard's master, the one holding the storage
// format's registry, is killed with SIGKILL: the other shards keep serving
// while its replica takes over, the old master rejoins as its replica, and
// every process is registered again. Then a queue's slot is
// moved to another shard under load. Every acknowledged job succeeds and no
// process restarts.
func TestClusterFailoverAndMigration(t *testing.T) {
	start := time.Now()
	phase := func(what string) { t.Logf("%5.1fs %s", time.Since(start).Seconds(), what) }
	cl := hatest.StartCluster(t)
	phase("cluster up")
	shards := cl.QueuesOnShards("hc", 2)
	// The shard killed below is the one holding the storage format's
	// registry ({.storage}): every process's renewals fail while it fails
	// over, well inside a registration's 30 s, and no process may stop
	// its engine work for that.
	registry := cl.MasterOf(cl.KeySlot("sundial:{.storage}:readers"))
	for i, on := range shards {
		if cl.MasterOf(cl.KeySlot("{"+on[0]+"}")) == registry {
			shards[0], shards[i] = shards[i], shards[0]
		}
	}
	if cl.MasterOf(cl.KeySlot("{"+shards[0][0]+"}")) != registry {
		t.Fatal("no shard of the test's queues holds the storage format's registry")
	}
	var queues []string
	for _, on := range shards {
		queues = append(queues, on...)
	}
	s := startStack(t, cl.Seeds(), queues, 2,
		"SUNDIAL_REDIS_WAIT_REPLICAS=1", "SUNDIAL_REDIS_WAIT_TIMEOUT=500ms", "SUNDIAL_HISTORY=off")

	phase("binaries up")
	// Schedules on every shard.
	for i, on := range shards {
		code, b, err := s.Call("PUT", fmt.Sprintf("/v1/schedules/tick-%d", i), map[string]any{
			"every_seconds": 1, "job": map[string]any{"queue": on[0], "type": "sundial.echo"},
		}, 10*time.Second)
		if err != nil || code != http.StatusCreated {
			t.Fatalf("create schedule on %s: %d %s %v", on[0], code, b, err)
		}
	}

	l := &ledger{}
	stopLoad := s.load(queues, 10*time.Millisecond, l)
	hatest.Eventually(t, 30*time.Second, "steady load", func() bool { return len(l.snapshot()) >= 150 })

	phase("steady load")
	// The registry spans the shards.
	names := func(path, list, field string) []string {
		code, b, err := s.Call("GET", path, nil, 10*time.Second)
		if err != nil || code != http.StatusOK {
			t.Fatalf("GET %s: %d %s %v", path, code, b, err)
		}
		var out map[string][]map[string]any
		if err := json.Unmarshal(b, &out); err != nil {
			t.Fatalf("GET %s: %v: %s", path, err, b)
		}
		var ns []string
		for _, item := range out[list] {
			ns = append(ns, fmt.Sprint(item[field]))
		}
		return ns
	}
	hatest.Eventually(t, 10*time.Second, "both workers in GET /v1/workers", func() bool {
		return len(names("/v1/workers", "workers", "id")) == 2
	})
	listed := strings.Join(names("/v1/queues", "queues", "name"), ",")
	for _, q := range queues {
		if !strings.Contains(listed, q) {
			t.Errorf("GET /v1/queues lists %s, not %s", listed, q)
		}
	}
	if sch := names("/v1/schedules", "schedules", "id"); len(sch) != 3 {
		t.Errorf("GET /v1/schedules lists %v, want the 3 schedules of the 3 shards", sch)
	}

	// A dependency on a job of another queue (here: another shard) waits
	// for it, settled by the poller; the ledger's final check requires it
	// to succeed through the failover and the slot move below.
	parent, err := s.submit(shards[0][0], "parent", nil, l)
	if err != nil {
		t.Fatal(err)
	}
	child, err := s.submit(shards[1][0], "child", map[string]any{"depends_on": []string{parent}}, l)
	if err != nil {
		t.Errorf("dependency across queues: %v", err)
	}
	t.Logf("dependency across queues: job %s waits for %s", child, parent)

	phase("registry and dependency checked")
	// Kill one shard's master.
	victim := cl.MasterOf(cl.KeySlot("{" + shards[0][0] + "}"))
	killed := time.Now()
	victim.Kill()
	// The other shards keep serving while it fails over.
	var others []string
	for i, on := range shards[1:] {
		id, err := s.submit(on[0], fmt.Sprintf("during-%d", i), nil, l)
		if err != nil {
			t.Fatalf("submit to a healthy shard during the failover: %v", err)
		}
		others = append(others, id)
	}
	hatest.Eventually(t, 10*time.Second, "jobs of the healthy shards run during the failover", func() bool {
		for _, id := range others {
			if s.state(id) != "succeeded" {
				return false
			}
		}
		return true
	})
	healthyDone := time.Since(killed)
	hatest.Eventually(t, 30*time.Second, "a replica takes over the killed shard", func() bool {
		return cl.MasterOf(cl.KeySlot("{"+shards[0][0]+"}")) != victim
	})
	promoted := time.Since(killed)
	if healthyDone >= promoted {
		t.Errorf("the healthy shards' jobs ran only after the failed shard was back (%v, failover %v)", healthyDone, promoted)
	}
	// With SUNDIAL_REDIS_WAIT_REPLICAS=1 the shard takes submits again once
	// it has a replica: the old master comes back and joins as one.
	victim.Restart()
	before := len(l.snapshot())
	hatest.Eventually(t, 30*time.Second, "submits acknowledged on every shard again", func() bool {
		return len(l.snapshot()) >= before+120
	})

	// Every process is registered again on the promoted master.
	hatest.Eventually(t, 30*time.Second, "the API, poller and workers registered as readers after the failover", func() bool {
		code, b, err := s.Call("GET", "/v1/storage", nil, 10*time.Second)
		var st struct{ Readers []struct{ Role string } }
		if err != nil || code != http.StatusOK || json.Unmarshal(b, &st) != nil {
			return false
		}
		var roles []string
		for _, r := range st.Readers {
			roles = append(roles, r.Role)
		}
		all := strings.Join(roles, ",")
		return strings.Contains(all, "api") && strings.Contains(all, "poller") && strings.Count(all, "worker") == 2
	})

	phase("failover done, load acknowledged again")
	// Move a queue's slot to another shard under load.
	moved := shards[1][0]
	slot := cl.KeySlot("{" + moved + "}")
	dst := cl.MasterOf(cl.KeySlot("{" + shards[2][0] + "}"))
	moveStart := time.Now()
	cl.MoveSlot(slot, dst)
	moveTook := time.Since(moveStart)
	if cl.MasterOf(slot) != dst {
		t.Fatalf("slot %d did not move", slot)
	}
	before = len(l.snapshot())
	hatest.Eventually(t, 30*time.Second, "submits acknowledged after the move", func() bool {
		return len(l.snapshot()) >= before+120
	})

	phase("slot moved, load acknowledged again")
	stopLoad()
	s.settle(l, 60*time.Second)
	s.alive()
	phase("every acknowledged job succeeded")
	t.Logf("%d jobs acknowledged over %d queues on 3 shards, all succeeded; healthy shards served %v after the kill, replica promoted after %v; slot %d (queue %s) moved in %v",
		len(l.snapshot()), len(queues), healthyDone.Round(time.Millisecond), promoted.Round(time.Millisecond), slot, moved, moveTook.Round(time.Millisecond))
}
