package config

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Each URL form gives the go-redis client of its deployment, and each
// dials once per try within RedisDialTimeout (a dead Redis refuses at
// once; go-redis's 5 dials per try made a request wait 3.4 s).
func TestNewRedisKinds(t *testing.T) {
	for _, tc := range []struct {
		url  string
		want string
	}{
		{"redis://127.0.0.1:6379/0", "*redis.Client"},
		{"redis+sentinel://127.0.0.1:26379,127.0.0.1:26380/mymaster", "*redis.Client"}, // the failover client
		{"127.0.0.1:7000,127.0.0.1:7001", "*redis.ClusterClient"},
		{"127.0.0.1:7000", "*redis.ClusterClient"},
	} {
		c, err := NewRedis(tc.url)
		if err != nil {
			t.Fatalf("%s: %v", tc.url, err)
		}
		got, retries, timeout := "?", 0, time.Duration(0)
		switch cc := c.(type) {
		case *redis.Client:
			got, retries, timeout = "*redis.Client", cc.Options().DialerRetries, cc.Options().DialTimeout
		case *redis.ClusterClient:
			got, retries, timeout = "*redis.ClusterClient", cc.Options().DialerRetries, cc.Options().DialTimeout
		}
		if retries != 1 || timeout != RedisDialTimeout {
			t.Errorf("%s: DialerRetries %d, DialTimeout %v; want 1, %v", tc.url, retries, timeout, RedisDialTimeout)
		}
		if got != tc.want {
			t.Errorf("%s: %s, want %s", tc.url, got, tc.want)
		}
		c.Close()
	}
}
