package config

import (
	"testing"

	"github.com/redis/go-redis/v9"
)

// Each URL form gives the go-redis client of its deployment; a Cluster's
// client dials a node once per try (a dead master refuses at once).
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
		got := "?"
		switch cc := c.(type) {
		case *redis.Client:
			got = "*redis.Client"
		case *redis.ClusterClient:
			got = "*redis.ClusterClient"
			if n := cc.Options().DialerRetries; n != 1 {
				t.Errorf("%s: DialerRetries %d, want 1", tc.url, n)
			}
		}
		if got != tc.want {
			t.Errorf("%s: %s, want %s", tc.url, got, tc.want)
		}
		c.Close()
	}
}
