package deploycheck

import (
	"context"
	"net"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/compose-spec/compose-go/v2/loader"
	"github.com/compose-spec/compose-go/v2/types"
	"github.com/sundialhq/sundial/pkg/config"
)

// loadCompose loads docker-compose.yml as Docker Compose does (schema
// validation, interpolation of ${…} from env, YAML merge keys).
func loadCompose(t *testing.T, env map[string]string) *types.Project {
	t.Helper()
	abs, err := filepath.Abs(repo)
	if err != nil {
		t.Fatal(err)
	}
	p, err := loader.LoadWithContext(context.Background(), types.ConfigDetails{
		WorkingDir:  abs,
		ConfigFiles: []types.ConfigFile{{Filename: filepath.Join(abs, "docker-compose.yml")}},
		Environment: env,
	}, func(o *loader.Options) { o.SetProjectName("sundial", true) })
	if err != nil {
		t.Fatalf("docker-compose.yml: %v", err)
	}
	return p
}

// configVars is the set of variable names pkg/config reads.
func configVars() map[string]bool {
	out := map[string]bool{}
	for _, v := range config.Vars {
		out[v.Name] = true
	}
	return out
}

// loadConfig runs env (what a process sees) through pkg/config, the same
// validation a binary does at startup, after checking every SUNDIAL_* name.
func loadConfig(t *testing.T, where string, env map[string]string) *config.Config {
	t.Helper()
	known := configVars()
	for name := range env {
		if strings.HasPrefix(name, "SUNDIAL_") && !known[name] {
			t.Errorf("%s: %s is not a variable of pkg/config (docs/configuration.md)", where, name)
		}
	}
	c, err := config.Load(func(k string) string { return env[k] })
	if err != nil {
		t.Errorf("%s: the binary would refuse to start: %v", where, err)
		return nil
	}
	return c
}

// sundialService tells Sundial's services (built from the Dockerfile) from
// the third-party ones.
func sundialService(s types.ServiceConfig) bool { return s.Build != nil }

func TestComposeServices(t *testing.T) {
	p := loadCompose(t, nil)
	var names []string
	for name := range p.Services {
		names = append(names, name)
	}
	slices.Sort(names)
	want := []string{"api", "mongo", "mongo-init", "poller", "redis", "worker"}
	if !slices.Equal(names, want) {
		t.Fatalf("services %v, want %v", names, want)
	}

	// Whom each service waits for, and how.
	completed := map[string]bool{} // one-shot services: others wait for them to exit 0
	for _, s := range p.Services {
		for dep, d := range s.DependsOn {
			if _, ok := p.Services[dep]; !ok {
				t.Errorf("%s depends on unknown service %s", s.Name, dep)
			}
			switch d.Condition {
			case types.ServiceConditionHealthy:
				if p.Services[dep].HealthCheck == nil {
					t.Errorf("%s waits for %s to be healthy, which has no healthcheck", s.Name, dep)
				}
			case types.ServiceConditionCompletedSuccessfully:
				completed[dep] = true
			case types.ServiceConditionStarted:
				if !slices.Contains([]string{"mongo-init"}, s.Name) {
					t.Errorf("%s → %s: condition service_started; wait for health instead", s.Name, dep)
				}
			default:
				t.Errorf("%s → %s: condition %q", s.Name, dep, d.Condition)
			}
		}
	}
	for _, s := range p.Services {
		if completed[s.Name] {
			if s.Restart != "no" {
				t.Errorf("%s is a one-shot step (others wait for it to exit 0): restart must be \"no\", is %q", s.Name, s.Restart)
			}
			continue
		}
		hc := s.HealthCheck
		if hc == nil || hc.Disable || len(hc.Test) < 2 {
			t.Errorf("%s: no healthcheck", s.Name)
		}
		if s.Restart != "unless-stopped" {
			t.Errorf("%s: restart %q, want unless-stopped", s.Name, s.Restart)
		}
	}
	for _, name := range []string{"api", "poller", "worker"} {
		if _, ok := p.Services[name].DependsOn["redis"]; !ok {
			t.Errorf("%s must wait for redis", name)
		}
	}
	for _, name := range []string{"api", "poller"} {
		if d := p.Services[name].DependsOn["mongo-init"]; d.Condition != types.ServiceConditionCompletedSuccessfully {
			t.Errorf("%s must wait for the replica set (mongo-init completed), has %+v", name, d)
		}
	}
}

func TestComposeStores(t *testing.T) {
	p := loadCompose(t, nil)
	redis := p.Services["redis"]
	cmd := strings.Join(redis.Command, " ")
	if !strings.Contains(cmd, "--appendonly yes") {
		t.Errorf("redis must run with AOF on: %s", cmd)
	}
	if !hasVolume(redis, "/data") {
		t.Error("redis keeps its AOF in /data: mount a volume there")
	}
	mongo := p.Services["mongo"]
	if !strings.HasPrefix(mongo.Image, "mongo:7") && !strings.HasPrefix(mongo.Image, "mongo:8") {
		t.Errorf("mongo image %s: want mongo 7 or 8", mongo.Image)
	}
	if i := slices.Index(mongo.Command, "--replSet"); i < 0 || i+1 >= len(mongo.Command) {
		t.Fatalf("mongo must run as a replica set (--replSet): %v", mongo.Command)
	}
	rs := mongo.Command[slices.Index(mongo.Command, "--replSet")+1]
	if !hasVolume(mongo, "/data/db") {
		t.Error("mongo keeps its data in /data/db: mount a volume there")
	}
	init := strings.Join(p.Services["mongo-init"].Command, " ")
	for _, want := range []string{`_id: "` + rs + `"`, `host: "mongo:27017"`, "rs.initiate", "isWritablePrimary"} {
		if !strings.Contains(init, want) {
			t.Errorf("mongo-init must initiate replica set %s with member mongo:27017 and wait for a primary; missing %q", rs, want)
		}
	}

	// Sundial's services reach both by service name, MongoDB as the replica set.
	for _, s := range p.Services {
		if !sundialService(s) {
			continue
		}
		env := s.Environment.ToMapping()
		r, err := url.Parse(env["SUNDIAL_REDIS_URL"])
		if err != nil || r.Hostname() != "redis" {
			t.Errorf("%s: SUNDIAL_REDIS_URL %q must point at the redis service", s.Name, env["SUNDIAL_REDIS_URL"])
		}
		m, err := url.Parse(env["SUNDIAL_MONGO_URI"])
		if err != nil || m.Host != "mongo:27017" || m.Query().Get("replicaSet") != rs {
			t.Errorf("%s: SUNDIAL_MONGO_URI %q must name host mongo:27017 and replicaSet=%s", s.Name, env["SUNDIAL_MONGO_URI"], rs)
		}
	}
}

func hasVolume(s types.ServiceConfig, target string) bool {
	for _, v := range s.Volumes {
		if v.Target == target && v.Type == types.VolumeTypeVolume {
			return true
		}
	}
	return false
}

// TestComposeSundialServices checks each Sundial service against the image
// and pkg/config: the command is a binary of the image, the environment the
// binary would see (the image's ENV, then the service's) passes the
// configuration's validation, health checks hit the port the process listens
// on, and a stop waits longer than the shutdown timeout. It runs with no
// variables set (the defaults) and with the documented ones set.
func TestComposeSundialServices(t *testing.T) {
	img := loadImage(t)
	for _, tc := range []struct {
		name string
		env  map[string]string
	}{
		{"defaults", nil},
		{"documented variables", map[string]string{
			"SUNDIAL_API_KEYS": "k1,k2", "SUNDIAL_PORT": "9000", "SUNDIAL_QUEUES": "critical,default:3",
			"SUNDIAL_CONCURRENCY": "50", "SUNDIAL_LOG_LEVEL": "debug", "SUNDIAL_LOG_FORMAT": "json",
			"SUNDIAL_IMAGE": "registry.example.com/sundial:1.0",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := loadCompose(t, tc.env)
			for _, name := range []string{"api", "poller", "worker"} {
				checkComposeService(t, img, p.Services[name])
			}
			worker := p.Services["worker"]
			if worker.ContainerName != "" || len(worker.Ports) > 0 {
				t.Error("worker: a container_name or a published port breaks --scale worker=N")
			}
			api := p.Services["api"]
			if len(api.Ports) != 1 || api.Ports[0].Target != 8080 {
				t.Errorf("api must publish the API port 8080: %+v", api.Ports)
			}
			if tc.env["SUNDIAL_PORT"] != "" && api.Ports[0].Published != tc.env["SUNDIAL_PORT"] {
				t.Errorf("SUNDIAL_PORT=%s not applied: %+v", tc.env["SUNDIAL_PORT"], api.Ports[0])
			}
			if c := loadConfig(t, "worker", worker.Environment.ToMapping()); c != nil && tc.env["SUNDIAL_CONCURRENCY"] != "" && c.Concurrency != 50 {
				t.Errorf("SUNDIAL_CONCURRENCY not passed to the worker: %d", c.Concurrency)
			}
		})
	}
}

func checkComposeService(t *testing.T, img *image, s types.ServiceConfig) {
	t.Helper()
	if len(s.Command) != 1 || img.binaries[s.Command[0]] != "./services/"+s.Name {
		t.Errorf("%s: command %v, want [%s] (the binary of ./services/%s in the image)", s.Name, s.Command, "/usr/local/bin/"+s.Name, s.Name)
	}
	if s.User == "" || strings.HasPrefix(s.User, "0") || s.User == "root" {
		t.Errorf("%s: user %q: run as the image's non-root user", s.Name, s.User)
	}
	if !s.ReadOnly {
		t.Errorf("%s: read_only must be true (the binaries write nothing)", s.Name)
	}

	env := map[string]string{}
	for k, v := range img.env {
		env[k] = v
	}
	for k, v := range s.Environment.ToMapping() {
		env[k] = v
	}
	c := loadConfig(t, s.Name, env)
	if c == nil {
		return
	}
	if s.StopGracePeriod == nil || time.Duration(*s.StopGracePeriod) <= c.ShutdownTimeout {
		t.Errorf("%s: stop_grace_period must be longer than SUNDIAL_SHUTDOWN_TIMEOUT (%v)", s.Name, c.ShutdownTimeout)
	}

	// The health check: sundial-probe against this process's own port.
	listen := c.HTTPAddr
	if s.Name != "api" {
		listen = c.MetricsAddr
	}
	_, port, err := net.SplitHostPort(listen)
	if err != nil {
		t.Errorf("%s: must listen on an explicit host:port inside the container, not %q", s.Name, listen)
		return
	}
	if host, _, _ := net.SplitHostPort(listen); host != "0.0.0.0" && host != "" {
		t.Errorf("%s: listens on %s; inside a container it must listen on every interface", s.Name, listen)
	}
	hc := s.HealthCheck
	if hc == nil || len(hc.Test) != 3 || hc.Test[0] != "CMD" || img.binaries[hc.Test[1]] != "./cmd/sundial-probe" {
		t.Errorf("%s: healthcheck must be [CMD /usr/local/bin/sundial-probe URL] (no shell in the image): %v", s.Name, hc)
		return
	}
	u, err := url.Parse(hc.Test[2])
	if err != nil || u.Port() != port || (u.Path != "/readyz" && u.Path != "/healthz") {
		t.Errorf("%s: healthcheck URL %s must be /readyz or /healthz on port %s", s.Name, hc.Test[2], port)
	}
}
