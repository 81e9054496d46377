package config

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisDialTimeout bounds one connection attempt to Redis (TCP and TLS),
// instead of go-redis's 5 s: a Redis that does not accept within a second
// is down for a request's purposes, and the caller hears so in time.
const RedisDialTimeout = time.Second

// RedisOptions turns SUNDIAL_REDIS_URL into go-redis universal options:
//   - redis://[user:pass@]host:port[/db] and rediss:// (TLS): one server;
//   - redis+sentinel://[:pass@]host:port[,host:port…]/master[/db]: Sentinel;
//   - host:port,host:port[,…] (no scheme): a Redis Cluster's seed nodes.
//
// Every form dials once per try, within RedisDialTimeout (see bounded).
func RedisOptions(raw string) (*redis.UniversalOptions, error) {
	o, err := redisOptions(raw)
	if err != nil {
		return nil, err
	}
	bounded(o)
	return o, nil
}

// bounded makes a dead Redis cost a caller little time. go-redis dials up
// to 5 times per try (100 ms apart) and tries a command 4 times, so with
// a killed Redis (connection refused) the first command of a warm pool
// took 4 dials × 5 attempts ≈ 1.7 s, and a request with two commands
// answered 503 after 3.4 s (later ones fast only once 20 dials had failed
// and the pool answered its last dial error at once). One dial attempt per
// try keeps the command's own retries (a stale pooled connection, a
// failover's EOF, with 10 ms… backoff) and answers "refused" in
// milliseconds; a Redis that accepts no connection (a host gone) costs
// RedisDialTimeout per try instead of 5 s. Reads keep go-redis's 5 s
// ReadTimeout, which long scripts need (a Redis that accepts but does not
// answer still costs that per command), and blocking commands (BLPOP)
// still get their own timeout added to it.
//
// Every command also honours its context's deadline
// (ContextTimeoutEnabled): an API request's deadline (SUNDIAL_REQUEST_TIMEOUT)
// bounds its wait for a Redis that accepts bytes and answers nothing
// (stopped, or cut off behind a dead route), which otherwise costs
// ReadTimeout per try.
func bounded(o *redis.UniversalOptions) {
	o.DialerRetries = 1
	o.DialTimeout = RedisDialTimeout
	o.ContextTimeoutEnabled = true
}

func redisOptions(raw string) (*redis.UniversalOptions, error) {
	switch {
	case strings.HasPrefix(raw, "redis://"), strings.HasPrefix(raw, "rediss://"):
		o, err := redis.ParseURL(raw)
		if err != nil {
			return nil, fmt.Errorf("not a valid redis URL")
		}
		return &redis.UniversalOptions{
			Addrs: []string{o.Addr}, Username: o.Username, Password: o.Password,
			DB: o.DB, TLSConfig: o.TLSConfig,
		}, nil
	case strings.HasPrefix(raw, "redis+sentinel://"):
		rest := strings.TrimPrefix(raw, "redis+sentinel://")
		var password string
		if at := strings.LastIndex(rest, "@"); at >= 0 {
			cred := rest[:at]
			rest = rest[at+1:]
			if _, p, ok := strings.Cut(cred, ":"); ok {
				password, _ = url.PathUnescape(p)
			}
		}
		hosts, path, _ := strings.Cut(rest, "/")
		parts := strings.Split(path, "/")
		if hosts == "" || parts[0] == "" {
			return nil, fmt.Errorf("sentinel URL needs hosts and a master name: redis+sentinel://host:26379/mymaster")
		}
		o := &redis.UniversalOptions{Addrs: strings.Split(hosts, ","), MasterName: parts[0], Password: password}
		if len(parts) > 1 && parts[1] != "" {
			db, err := strconv.Atoi(parts[1])
			if err != nil {
				return nil, fmt.Errorf("sentinel URL: bad db number")
			}
			o.DB = db
		}
		return o, nil
	case strings.Contains(raw, "://"):
		return nil, fmt.Errorf("scheme must be redis://, rediss:// or redis+sentinel://")
	default:
		addrs := splitList(raw)
		if len(addrs) == 0 {
			return nil, fmt.Errorf("empty")
		}
		for _, a := range addrs {
			if !strings.Contains(a, ":") {
				return nil, fmt.Errorf("cluster node %q must be host:port", a)
			}
		}
		// Two or more seeds, or one seed without a scheme: cluster mode.
		// The one dial attempt per try (bounded) matters most here: a
		// dead master answers "refused" at once, and retrying the dial
		// (5 × 100 ms by default, times each redirect) would stall every
		// caller that also touches the healthy shards while the dead one
		// fails over.
		return &redis.UniversalOptions{Addrs: addrs, IsClusterMode: true}, nil
	}
}

// NewRedis returns a go-redis universal client for SUNDIAL_REDIS_URL. A
// Cluster client reloads the cluster's slot map whenever a node cannot be
// reached, so that it finds a failed-over shard's new master at once rather
// than at its next periodic reload.
func NewRedis(raw string) (redis.UniversalClient, error) {
	o, err := RedisOptions(raw)
	if err != nil {
		return nil, err
	}
	c := redis.NewUniversalClient(o)
	if cc, ok := c.(*redis.ClusterClient); ok {
		cc.AddHook(reloadOnNodeFailure{cc})
	}
	return c, nil
}

// reloadOnNodeFailure asks a cluster client to reload its slot map after a
// connection error (go-redis reloads on MOVED, and on a timer, but not when
// a master died). Reloads are rate-limited by go-redis itself.
type reloadOnNodeFailure struct{ cc *redis.ClusterClient }

func (h reloadOnNodeFailure) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h reloadOnNodeFailure) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		h.check(ctx, err)
		return err
	}
}

func (h reloadOnNodeFailure) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		h.check(ctx, err)
		return err
	}
}

func (h reloadOnNodeFailure) check(ctx context.Context, err error) {
	var ne net.Error
	if err != nil && ctx.Err() == nil && (errors.As(err, &ne) || errors.Is(err, io.EOF) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || redis.IsClusterDownError(err)) {
		h.cc.ReloadState(context.WithoutCancel(ctx))
	}
}
