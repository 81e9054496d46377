package config

import (
	"os"
	"strings"
	"testing"
	"time"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestDefaults(t *testing.T) {
	c, err := Load(env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if c.RedisURL != "redis://127.0.0.1:6379/0" || c.HTTPAddr != "127.0.0.1:8080" || c.Concurrency != 10 ||
		c.RateLimit != "1000-S" || c.MaxBodyBytes != 1<<20 || c.MaxBatchBodyBytes != 16<<20 ||
		len(c.Queues) != 1 || c.Queues[0].Name != "default" || c.ShutdownTimeout != 30*time.Second || c.WorkerID == "" {
		t.Fatalf("defaults = %+v", c)
	}
}

func TestInvalidValuesAreNamed(t *testing.T) {
	_, err := Load(env(map[string]string{
		"SUNDIAL_CONCURRENCY":   "zero",
		"SUNDIAL_QUEUES":        "ok,Bad Queue",
		"SUNDIAL_RATE_LIMIT":    "fast",
		"SUNDIAL_REDIS_URL":     "http://user:hunter2@x",
		"SUNDIAL_LOG_LEVEL":     "loud",
		"SUNDIAL_HTTP_ADDR":     "8080",
		"SUNDIAL_LOG_FORMAT":    "xml",
		"SUNDIAL_LEASE_GRACE":   "1",
		"SUNDIAL_MONGO_URI":     "postgres://x",
		"SUNDIAL_EVENTS_MAXLEN": "5",
	}))
	if err == nil {
		t.Fatal("no error")
	}
	for _, name := range []string{"SUNDIAL_CONCURRENCY", "SUNDIAL_QUEUES", "SUNDIAL_RATE_LIMIT", "SUNDIAL_REDIS_URL", "SUNDIAL_LOG_LEVEL", "SUNDIAL_HTTP_ADDR", "SUNDIAL_LOG_FORMAT", "SUNDIAL_LEASE_GRACE", "SUNDIAL_MONGO_URI", "SUNDIAL_EVENTS_MAXLEN"} {
		if !strings.Contains(err.Error(), name) {
			t.Errorf("error does not name %s:\n%v", name, err)
		}
	}
	if strings.Contains(err.Error(), "hunter2") {
		t.Fatal("error leaks a password")
	}
}

func TestQueues(t *testing.T) {
	qs, err := ParseQueues("critical:6, default:3,low")
	if err != nil || len(qs) != 3 || qs[0] != (QueueWeight{"critical", 6}) || qs[2] != (QueueWeight{"low", 1}) {
		t.Fatalf("%v %v", qs, err)
	}
	for _, bad := range []string{"", "a,a", "a:0", "a:x", "A"} {
		if _, err := ParseQueues(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestRedisURLs(t *testing.T) {
	o, err := RedisOptions("redis+sentinel://:pw@h1:26379,h2:26379/mymaster/2")
	if err != nil || o.MasterName != "mymaster" || len(o.Addrs) != 2 || o.Password != "pw" || o.DB != 2 {
		t.Fatalf("sentinel = %+v, %v", o, err)
	}
	o, err = RedisOptions("10.0.0.1:7000,10.0.0.2:7000")
	if err != nil || !o.IsClusterMode || len(o.Addrs) != 2 {
		t.Fatalf("cluster = %+v, %v", o, err)
	}
	if _, err := RedisOptions("redis+sentinel://h1:26379"); err == nil {
		t.Fatal("sentinel without master accepted")
	}
}

func TestMaskHidesSecrets(t *testing.T) {
	c, _ := Load(env(map[string]string{"SUNDIAL_API_KEYS": "k1,k2", "SUNDIAL_REDIS_URL": "redis://:s3cret@h:6379/0"}))
	all := ""
	for _, a := range c.Effective(env(map[string]string{"SUNDIAL_API_KEYS": "k1,k2", "SUNDIAL_REDIS_URL": "redis://:s3cret@h:6379/0"})) {
		all += " " + a.(interface{ String() string }).String()
	}
	if strings.Contains(all, "s3cret") || strings.Contains(all, "k1") {
		t.Fatalf("effective config leaks secrets: %s", all)
	}
}

// Every variable is documented in docs/configuration.md.
func TestEveryVariableIsDocumented(t *testing.T) {
	b, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range Vars {
		if !strings.Contains(string(b), "`"+v.Name+"`") {
			t.Errorf("%s is not in docs/configuration.md", v.Name)
		}
	}
}

// TestAddresses: each listen-address variable takes host:port and its own
// words, and refuses anything else with a message naming what it takes.
func TestAddresses(t *testing.T) {
	for _, tc := range []struct {
		name, value, errPart string
		get                  func(*Config) string
	}{
		{"SUNDIAL_HTTP_ADDR", "0.0.0.0:9000", "", func(c *Config) string { return c.HTTPAddr }},
		{"SUNDIAL_HTTP_ADDR", "off", "must be host:port", nil},
		{"SUNDIAL_METRICS_ADDR", "auto", "", func(c *Config) string { return c.MetricsAddr }},
		{"SUNDIAL_METRICS_ADDR", "127.0.0.1:0", "", func(c *Config) string { return c.MetricsAddr }},
		{"SUNDIAL_METRICS_ADDR", "9090", "must be auto, off or host:port", nil},
		{"SUNDIAL_PPROF_ADDR", "off", "", func(c *Config) string { return c.PprofAddr }},
		{"SUNDIAL_PPROF_ADDR", "127.0.0.1:6060", "", func(c *Config) string { return c.PprofAddr }},
		{"SUNDIAL_PPROF_ADDR", "auto", "must be off or host:port", nil},
	} {
		c, err := Load(env(map[string]string{tc.name: tc.value}))
		if tc.errPart != "" {
			if err == nil || !strings.Contains(err.Error(), tc.name) || !strings.Contains(err.Error(), tc.errPart) {
				t.Errorf("%s=%s: err %v, want one naming it and saying %q", tc.name, tc.value, err, tc.errPart)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s=%s: %v", tc.name, tc.value, err)
		} else if got := tc.get(c); got != tc.value {
			t.Errorf("%s=%s: read as %q", tc.name, tc.value, got)
		}
	}
}

// TestHTTPJobAllow: SUNDIAL_HTTP_JOB_ALLOW is parsed into the webhook
// policy at startup, and a bad entry stops the process with a message
// naming the variable and the entry.
func TestHTTPJobAllow(t *testing.T) {
	c, err := Load(env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if c.HTTPJobAllow == nil || c.HTTPJobAllow.String() != "" {
		t.Errorf("default policy %v, want public addresses only", c.HTTPJobAllow)
	}
	c, err = Load(env(map[string]string{"SUNDIAL_HTTP_JOB_ALLOW": " hooks.internal:8443, 10.1.0.0/16 "}))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.HTTPJobAllow.String(); got != "hooks.internal:8443,10.1.0.0/16" {
		t.Errorf("policy %q", got)
	}
	_, err = Load(env(map[string]string{"SUNDIAL_HTTP_JOB_ALLOW": "api.example.com,https://hooks.example.com"}))
	if err == nil || !strings.Contains(err.Error(), `SUNDIAL_HTTP_JOB_ALLOW="api.example.com,https://hooks.example.com": entry "https://hooks.example.com": write a host`) {
		t.Errorf("a URL as an entry: %v", err)
	}
}
