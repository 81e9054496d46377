// Package hatest starts highly available Redis deployments for tests, as
// real processes on loopback: a Redis Cluster of 3 masters and 3 replicas,
// and a Sentinel-managed master with replicas and three sentinels. Every
// process has its own free port and temporary directory and is killed by
// pid when the test ends.
package hatest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sundialhq/sundial/internal/netfault"
	"github.com/sundialhq/sundial/pkg/queue/queuetest"
)

// Cluster is a Redis Cluster of redis-server processes owned by one test.
type Cluster struct {
	t        testing.TB
	replicas int
	Nodes    []*queuetest.Server
}

// StartCluster starts 3 masters and 3 replicas (cluster-node-timeout 1000 ms,
// cluster-require-full-coverage no, AOF everysec), creates the cluster with redis-cli and waits until every
// node reports cluster_state:ok and every master has its replica.
func StartCluster(t testing.TB) *Cluster {
	t.Helper()
	return StartClusterReplicas(t, 1)
}

// StartClusterReplicas is StartCluster with replicas replicas per master
// (0 for a cluster of three masters alone).
func StartClusterReplicas(t testing.TB, replicas int) *Cluster {
	t.Helper()
	need(t, "redis-server", "redis-cli")
	c := &Cluster{t: t, replicas: replicas}
	for range 3 * (1 + replicas) {
		c.Nodes = append(c.Nodes, queuetest.StartWith(t,
			// The bus port on a free port of its own, not port+10000.
			"--cluster-enabled", "yes", "--cluster-port", queuetest.FreePortArg,
			"--cluster-node-timeout", "1000",
			// The other shards serve while one shard fails over.
			"--cluster-require-full-coverage", "no",
			"--cluster-replica-validity-factor", "0",
			"--repl-diskless-sync", "yes", "--repl-diskless-sync-delay", "0"))
	}
	args := []string{"--cluster", "create"}
	for _, n := range c.Nodes {
		args = append(args, n.Addr())
	}
	args = append(args, "--cluster-replicas", strconv.Itoa(replicas), "--cluster-yes")
	if out, err := exec.Command("redis-cli", args...).CombinedOutput(); err != nil {
		t.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	c.WaitHealthy(30 * time.Second)
	return c
}

// Seeds is the cluster's SUNDIAL_REDIS_URL: its nodes, comma-separated.
func (c *Cluster) Seeds() string {
	addrs := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		addrs[i] = n.Addr()
	}
	return strings.Join(addrs, ",")
}

// Client returns a cluster client over the nodes, closed when the test ends.
func (c *Cluster) Client() *redis.ClusterClient {
	addrs := strings.Split(c.Seeds(), ",")
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
	c.t.Cleanup(func() { cc.Close() })
	return cc
}

// info runs CLUSTER INFO or another command on one node and returns its text.
func nodeCmd(addr string, args ...any) (string, error) {
	r := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	defer r.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	v, err := r.Do(ctx, args...).Text()
	return v, err
}

// WaitHealthy waits until every live node reports cluster_state:ok and
// agrees with the others on three masters that each have their connected
// replicas.
func (c *Cluster) WaitHealthy(timeout time.Duration) {
	c.t.Helper()
	Eventually(c.t, timeout, "cluster healthy", func() bool {
		for _, n := range c.Nodes {
			if !n.Alive() {
				continue
			}
			info, err := nodeCmd(n.Addr(), "cluster", "info")
			if err != nil || !strings.Contains(info, "cluster_state:ok") {
				return false
			}
		}
		masters := c.Masters()
		if len(masters) != 3 {
			return false
		}
		for _, m := range masters {
			if c.replicas == 0 {
				break
			}
			info, err := nodeCmd(m.Addr(), "info", "replication")
			if err != nil || !strings.Contains(info, "connected_slaves:"+strconv.Itoa(c.replicas)) || !strings.Contains(info, "state=online") {
				return false
			}
		}
		return true
	})
}

// Masters returns the live nodes that are masters owning slots.
func (c *Cluster) Masters() []*queuetest.Server {
	var out []*queuetest.Server
	for _, n := range c.Nodes {
		if !n.Alive() {
			continue
		}
		role, err := nodeCmd(n.Addr(), "info", "replication")
		if err != nil || !strings.Contains(role, "role:master") {
			continue
		}
		out = append(out, n)
	}
	return out
}

// MasterOf returns the live node that owns slot, as the live nodes see it.
func (c *Cluster) MasterOf(slot int) *queuetest.Server {
	c.t.Helper()
	for _, n := range c.Nodes {
		if !n.Alive() {
			continue
		}
		r := redis.NewClient(&redis.Options{Addr: n.Addr(), MaxRetries: -1})
		shards, err := r.ClusterShards(context.Background()).Result()
		r.Close()
		if err != nil {
			continue
		}
		for _, sh := range shards {
			for _, rg := range sh.Slots {
				if int64(slot) < rg.Start || int64(slot) > rg.End {
					continue
				}
				for _, nd := range sh.Nodes {
					if nd.Role != "master" {
						continue
					}
					for _, m := range c.Nodes {
						if m.Addr() == net.JoinHostPort(nd.IP, strconv.FormatInt(nd.Port, 10)) {
							return m
						}
					}
				}
			}
		}
	}
	c.t.Fatalf("no master owns slot %d", slot)
	return nil
}

// Sentinel is a master, two replicas and three sentinels (quorum 2,
// down-after 1000 ms) owned by one test.
type Sentinel struct {
	t         testing.TB
	Master    *queuetest.Server
	Replicas  []*queuetest.Server
	Sentinels []*Proc
	// Links are the replicas' connections to the first master, through a
	// proxy each, when started by StartLaggingSentinel: Stall makes a
	// replica fall behind while it stays up.
	Links []*netfault.Proxy
}

// MasterName is the name the sentinels monitor.
const MasterName = "sundial"

// StartSentinel starts the master, its replicas and the sentinels and waits
// until every sentinel knows both replicas.
func StartSentinel(t testing.TB) *Sentinel { t.Helper(); return startSentinel(t, false) }

// StartLaggingSentinel is StartSentinel with each replica replicating
// through a proxy of its own (Sentinel.Links), so that a test can make the
// replicas lag behind the master without their going down.
func StartLaggingSentinel(t testing.TB) *Sentinel { t.Helper(); return startSentinel(t, true) }

func startSentinel(t testing.TB, proxied bool) *Sentinel {
	t.Helper()
	need(t, "redis-server", "redis-sentinel")
	s := &Sentinel{t: t, Master: queuetest.StartWith(t, "--repl-diskless-sync", "yes", "--repl-diskless-sync-delay", "0")}
	host, port, _ := net.SplitHostPort(s.Master.Addr())
	for range 2 {
		h, p := host, port
		if proxied {
			link := netfault.Start(t, s.Master.Addr())
			s.Links = append(s.Links, link)
			h, p, _ = net.SplitHostPort(link.Addr())
		}
		s.Replicas = append(s.Replicas, queuetest.StartWith(t, "--replicaof", h, p,
			"--repl-diskless-sync", "yes", "--repl-diskless-sync-delay", "0"))
	}
	for range 3 {
		dir := t.TempDir()
		log := filepath.Join(dir, "sentinel.log")
		queuetest.StartOnFreePorts(t, func() (string, error) {
			p := queuetest.FreePort(t)
			_ = os.Remove(log)
			text := fmt.Sprintf("port %d\nbind 127.0.0.1\ndir %s\nlogfile %s\n"+
				"sentinel monitor %s %s %s 2\n"+
				"sentinel down-after-milliseconds %s 1000\n"+
				"sentinel failover-timeout %s 5000\n"+
				"sentinel parallel-syncs %s 2\n",
				p, dir, log, MasterName, host, port, MasterName, MasterName, MasterName)
			conf := filepath.Join(dir, "sentinel.conf")
			if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
				t.Fatal(err)
			}
			sp, err := startProc(t, "127.0.0.1:"+strconv.Itoa(p), "redis-sentinel", conf)
			if err != nil {
				b, _ := os.ReadFile(log)
				return string(b), err
			}
			s.Sentinels = append(s.Sentinels, sp)
			return "", nil
		})
	}
	Eventually(t, 30*time.Second, "sentinels see both replicas", func() bool {
		for _, sp := range s.Sentinels {
			r := redis.NewSentinelClient(&redis.Options{Addr: sp.Addr, MaxRetries: -1})
			reps, err := r.Replicas(context.Background(), MasterName).Result()
			r.Close()
			if err != nil || len(reps) < 2 {
				return false
			}
			for _, rep := range reps {
				if rep["flags"] != "slave" || rep["master-link-status"] != "ok" {
					return false
				}
			}
		}
		return true
	})
	return s
}

// URL is the deployment's SUNDIAL_REDIS_URL.
func (s *Sentinel) URL() string {
	addrs := make([]string, len(s.Sentinels))
	for i, sp := range s.Sentinels {
		addrs[i] = sp.Addr
	}
	return "redis+sentinel://" + strings.Join(addrs, ",") + "/" + MasterName
}

// CurrentMaster asks the first live sentinel for the master's address.
func (s *Sentinel) CurrentMaster() string {
	for _, sp := range s.Sentinels {
		r := redis.NewSentinelClient(&redis.Options{Addr: sp.Addr, MaxRetries: -1})
		addr, err := r.GetMasterAddrByName(context.Background(), MasterName).Result()
		r.Close()
		if err == nil && len(addr) == 2 {
			return net.JoinHostPort(addr[0], addr[1])
		}
	}
	return ""
}

// Proc is a server process other than redis-server (redis-sentinel).
type Proc struct {
	Addr string
	cmd  *exec.Cmd
	done chan struct{}
	once sync.Once
}

// startProc starts a server process that answers PING on addr, killed
// when t ends; an error when it exits before answering.
func startProc(t testing.TB, addr, name string, args ...string) (*Proc, error) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	p := &Proc{Addr: addr, cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(p.done) }()
	t.Cleanup(p.Kill)
	if err := queuetest.AwaitPing(addr, p.done); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return p, nil
}

// Kill stops the process with SIGKILL by its pid and waits for it.
func (p *Proc) Kill() {
	p.once.Do(func() {
		_ = p.cmd.Process.Signal(syscall.SIGKILL)
		<-p.done
	})
}

func need(t testing.TB, bins ...string) {
	t.Helper()
	for _, b := range bins {
		if _, err := exec.LookPath(b); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("%s not found on PATH", b)
			}
			t.Skipf("%s not found on PATH; install redis-server, redis-tools and redis-sentinel", b)
		}
	}
}

// Eventually polls cond until it holds or timeout passes, then fails t.
func Eventually(t testing.TB, timeout time.Duration, msg string, cond func() bool) {
	t.Helper()
	queuetest.Eventually(t, timeout, msg, cond)
}

// KeySlot asks a live node for the slot of key (CLUSTER KEYSLOT).
func (c *Cluster) KeySlot(key string) int {
	c.t.Helper()
	for _, n := range c.Nodes {
		if !n.Alive() {
			continue
		}
		r := redis.NewClient(&redis.Options{Addr: n.Addr(), MaxRetries: -1})
		s, err := r.ClusterKeySlot(context.Background(), key).Result()
		r.Close()
		if err == nil {
			return int(s)
		}
	}
	c.t.Fatal("no live node answers CLUSTER KEYSLOT")
	return 0
}

// QueuesOnShards returns perShard queue names (prefix-0, prefix-1, …) for
// each of the cluster's masters: names[i] all live on the i-th master.
// A queue's keys hash on "{name}".
func (c *Cluster) QueuesOnShards(prefix string, perShard int) [][]string {
	c.t.Helper()
	masters := c.Masters()
	index := map[string]int{}
	for i, m := range masters {
		index[m.Addr()] = i
	}
	out := make([][]string, len(masters))
	for i, full := 0, 0; full < len(masters); i++ {
		name := fmt.Sprintf("%s-%d", prefix, i)
		m := c.MasterOf(c.KeySlot("{" + name + "}"))
		k := index[m.Addr()]
		if len(out[k]) < perShard {
			out[k] = append(out[k], name)
			if len(out[k]) == perShard {
				full++
			}
		}
	}
	return out
}

// ID returns a node's cluster node id.
func ID(n *queuetest.Server) string {
	id, _ := nodeCmd(n.Addr(), "cluster", "myid")
	return id
}

// MoveSlot moves slot from its master to dst by hand while clients run:
// SETSLOT IMPORTING and MIGRATING, then every key of the slot in one
// MIGRATE (so that no script sees a queue half moved), then SETSLOT NODE on
// every live master.
func (c *Cluster) MoveSlot(slot int, dst *queuetest.Server) {
	c.t.Helper()
	src := c.MasterOf(slot)
	ctx := context.Background()
	srcC := redis.NewClient(&redis.Options{Addr: src.Addr()})
	defer srcC.Close()
	dstC := redis.NewClient(&redis.Options{Addr: dst.Addr()})
	defer dstC.Close()
	srcID, dstID := ID(src), ID(dst)
	must := func(err error) {
		c.t.Helper()
		if err != nil {
			c.t.Fatalf("move slot %d: %v", slot, err)
		}
	}
	must(dstC.Do(ctx, "cluster", "setslot", slot, "importing", srcID).Err())
	must(srcC.Do(ctx, "cluster", "setslot", slot, "migrating", dstID).Err())
	host, port, _ := net.SplitHostPort(dst.Addr())
	for {
		keys, err := srcC.ClusterGetKeysInSlot(ctx, slot, 100000).Result()
		must(err)
		if len(keys) == 0 {
			break
		}
		args := []any{"migrate", host, port, "", 0, 10000, "keys"}
		for _, k := range keys {
			args = append(args, k)
		}
		must(srcC.Do(ctx, args...).Err())
	}
	must(dstC.Do(ctx, "cluster", "setslot", slot, "node", dstID).Err())
	must(srcC.Do(ctx, "cluster", "setslot", slot, "node", dstID).Err())
	for _, m := range c.Masters() {
		if m != src && m != dst {
			r := redis.NewClient(&redis.Options{Addr: m.Addr()})
			must(r.Do(ctx, "cluster", "setslot", slot, "node", dstID).Err())
			r.Close()
		}
	}
}
