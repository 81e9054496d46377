// Package config reads Sundial's configuration from the environment into a
// typed Config, with defaults and validation in one table, so every binary
// fails fast with a clear message on a bad value and prints what it runs with.
package config

import (
	"fmt"
	"log/slog"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sundialhq/sundial/pkg/egress"
	"github.com/sundialhq/sundial/pkg/envelope"
)

// WaitReplicasAuto is SUNDIAL_REDIS_WAIT_REPLICAS=auto in
// Config.RedisWaitReplicas: queue.WaitReplicasAuto, which it is passed on
// as (this package does not import the engine, so that tools reading the
// configuration stay light).
const WaitReplicasAuto = -1

// QueueWeight is a queue a worker or poller serves, with its weight.
type QueueWeight struct {
	Name   string
	Weight int
}

// Config is the configuration shared by Sundial's binaries; each reads the
// parts it needs.
type Config struct {
	RedisURL          string
	MongoURI          string
	MongoDB           string
	HTTPAddr          string
	APIKeys           []string
	RateLimit         string
	AllowedOrigins    []string
	Queues            []QueueWeight
	Concurrency       int
	MaxBodyBytes      int64
	MaxBatchBodyBytes int64
	LogLevel          slog.Level
	LogFormat         string
	ShutdownTimeout   time.Duration
	RequestTimeout    time.Duration
	JobRetention      time.Duration
	LeaseTTL          time.Duration
	LeaseGrace        time.Duration
	JobLogLines       int
	RedisWaitReplicas int
	RedisWaitTimeout  time.Duration
	EventsMaxLen      int64
	DeadRetention     time.Duration
	DeadMax           int
	UnhandledTimeout  time.Duration
	// BatchRecountAfter: see SUNDIAL_BATCH_RECOUNT_AFTER.
	BatchRecountAfter time.Duration
	MetricsAddr       string
	PprofAddr         string
	HeartbeatInterval time.Duration
	WorkerID          string
	History           bool
	HistoryRetention  time.Duration
	// AuditRetention is how long the audit log keeps a record
	// (SUNDIAL_AUDIT_RETENTION).
	AuditRetention time.Duration
	// OIDC* configure the dashboard's sign-in with OpenID Connect
	// (SUNDIAL_OIDC_*); an empty OIDCIssuer turns it off.
	OIDCIssuer, OIDCClientID, OIDCClientSecret, OIDCRedirectURL string
	OIDCRolesClaim, OIDCRoles                                   string
	// SessionSecret seals the sign-in's cookies (SUNDIAL_SESSION_SECRET);
	// SessionIdle and SessionMax bound a session.
	SessionSecret           string
	SessionIdle, SessionMax time.Duration
	// OutboxPostgresURL is the database whose outbox the poller relays
	// (SUNDIAL_OUTBOX_POSTGRES_URL); empty for none.
	OutboxPostgresURL string
	// OutboxMongoURI and OutboxMongoDB name the MongoDB database whose
	// outbox the poller relays (SUNDIAL_OUTBOX_MONGO_URI); empty for none.
	OutboxMongoURI string
	OutboxMongoDB  string
	// HTTPJobAllow is what the sundial.http job type may reach besides
	// public addresses (SUNDIAL_HTTP_JOB_ALLOW).
	HTTPJobAllow *egress.Policy
	// Keyring decrypts encrypted payloads and encrypts results and error
	// text (SUNDIAL_KEYRING, SUNDIAL_KEYRING_FILE, SUNDIAL_KEYRING_PRIMARY;
	// docs/payloads.md, "Encryption"); nil when none is set.
	Keyring                              *envelope.Keyring
	keyring, keyringFile, keyringPrimary string
}

// Var describes one environment variable.
type Var struct {
	Name    string
	Default string
	Meaning string
	Secret  bool
	set     func(c *Config, v string) error
}

// Vars is the table of every variable, in documentation order.
var Vars = []Var{
	{"SUNDIAL_REDIS_URL", "redis://127.0.0.1:6379/0", "Redis: redis:// or rediss:// URL, redis+sentinel://[:password@]host:port[,host:port]/master[/db], or a comma list of cluster nodes host:port,host:port", true, func(c *Config, v string) error {
		c.RedisURL = v
		_, err := RedisOptions(v)
		return err
	}},
	{"SUNDIAL_REDIS_WAIT_REPLICAS", "auto", "submit: after writing a job, WAIT until this many Redis replicas have it before answering 201; fewer in time answers 503 and the client retries with its idempotency key. auto = every replica the queue's master has connected (0 when it has none); 0 = answer once the master has it (see docs/operations.md)", false, func(c *Config, v string) error {
		if v == "auto" {
			c.RedisWaitReplicas = WaitReplicasAuto
			return nil
		}
		return intVar(0, 16, func(c *Config, n int) { c.RedisWaitReplicas = n })(c, v)
	}},
	{"SUNDIAL_REDIS_WAIT_TIMEOUT", "1s", "submit: how long SUNDIAL_REDIS_WAIT_REPLICAS waits for the replicas", false, durVar(10*time.Millisecond, time.Minute, func(c *Config, d time.Duration) { c.RedisWaitTimeout = d })},
	{"SUNDIAL_MONGO_URI", "mongodb://127.0.0.1:27017", "MongoDB connection string (history store)", true, func(c *Config, v string) error {
		if !strings.HasPrefix(v, "mongodb://") && !strings.HasPrefix(v, "mongodb+srv://") {
			return fmt.Errorf("must start with mongodb:// or mongodb+srv://")
		}
		c.MongoURI = v
		return nil
	}},
	{"SUNDIAL_MONGO_DB", "sundial", "MongoDB database name", false, func(c *Config, v string) error {
		if v == "" || strings.ContainsAny(v, "/\\. \"$") {
			return fmt.Errorf("must be a valid database name")
		}
		c.MongoDB = v
		return nil
	}},
	{"SUNDIAL_HTTP_ADDR", "127.0.0.1:8080", "API listen address host:port", false, addrVar(func(c *Config, v string) { c.HTTPAddr = v })},
	{"SUNDIAL_API_KEYS", "", "comma-separated bearer API keys, each <key> (every scope) or <key>:<scope>+<scope> with scopes submit, work (the HTTP worker protocol), operate (act on jobs, queues, schedules, batches) and admin (implies the others), optionally followed by @<pattern>|<pattern> to limit the key to queues matching those patterns (billing-*); every key may read; empty = open API (development only)", true, func(c *Config, v string) error {
		c.APIKeys = splitList(v)
		return nil
	}},
	{"SUNDIAL_OIDC_ISSUER", "", "api: the OpenID provider's issuer URL; set, the dashboard signs users in with it (authorization code + PKCE) beside the API keys; empty = keys only (docs/security.md)", false, func(c *Config, v string) error {
		if v != "" && !strings.HasPrefix(v, "https://") && !strings.HasPrefix(v, "http://") {
			return fmt.Errorf("must be an http(s) URL")
		}
		c.OIDCIssuer = v
		return nil
	}},
	{"SUNDIAL_OIDC_CLIENT_ID", "", "api: this API's client id at the OpenID provider (needed with SUNDIAL_OIDC_ISSUER)", false, func(c *Config, v string) error {
		c.OIDCClientID = v
		return nil
	}},
	{"SUNDIAL_OIDC_CLIENT_SECRET", "", "api: the client's secret at the OpenID provider (empty for a public client)", true, func(c *Config, v string) error {
		c.OIDCClientSecret = v
		return nil
	}},
	{"SUNDIAL_OIDC_REDIRECT_URL", "", "api: the API's /auth/callback as registered at the provider, e.g. https://sundial.example.com/auth/callback (an https URL makes the cookies Secure)", false, func(c *Config, v string) error {
		if v != "" && !strings.HasPrefix(v, "https://") && !strings.HasPrefix(v, "http://") {
			return fmt.Errorf("must be an http(s) URL")
		}
		c.OIDCRedirectURL = v
		return nil
	}},
	{"SUNDIAL_OIDC_ROLES_CLAIM", "groups", "api: the ID token claim holding the user's groups or roles (a string or a list)", false, func(c *Config, v string) error {
		c.OIDCRolesClaim = v
		return nil
	}},
	{"SUNDIAL_OIDC_ROLES", "", "api: comma-separated <claim value>=<role>[@<pattern>|<pattern>] with roles viewer (read), operator (submit, work, act on jobs, queues, schedules, batches) and admin (everything), e.g. sundial-admins=admin,billing=operator@billing-*; empty = the claim values viewer, operator and admin themselves; a user with no mapped role cannot sign in", false, func(c *Config, v string) error {
		c.OIDCRoles = v
		return nil
	}},
	{"SUNDIAL_SESSION_SECRET", "", "api: at least 16 bytes that seal the sign-in's session cookies; empty = derived from SUNDIAL_OIDC_CLIENT_SECRET. The same on every API replica; changing it signs everyone out", true, func(c *Config, v string) error {
		if v != "" && len(v) < 16 {
			return fmt.Errorf("must be at least 16 bytes")
		}
		c.SessionSecret = v
		return nil
	}},
	{"SUNDIAL_SESSION_IDLE", "8h", "api: a signed-in session not used for this long ends (each use renews it)", false, durVar(time.Minute, 30*24*time.Hour, func(c *Config, d time.Duration) { c.SessionIdle = d })},
	{"SUNDIAL_SESSION_MAX", "24h", "api: a signed-in session ends this long after sign-in whatever its use", false, durVar(time.Minute, 90*24*time.Hour, func(c *Config, d time.Duration) { c.SessionMax = d })},
	{"SUNDIAL_RATE_LIMIT", "1000-S", "requests per API key (or client IP when open), limiter format <n>-<S|M|H|D>; 0 disables", false, func(c *Config, v string) error {
		if v != "0" {
			n, unit, ok := strings.Cut(v, "-")
			if i, err := strconv.Atoi(n); !ok || err != nil || i < 1 || !strings.Contains("SMHD", unit) || len(unit) != 1 {
				return fmt.Errorf("must look like 1000-S, 50000-M, 100-H or 10000-D")
			}
		}
		c.RateLimit = v
		return nil
	}},
	{"SUNDIAL_ALLOWED_ORIGINS", "", "extra browser origins allowed for the websocket and CORS, comma-separated (e.g. http://localhost:5173)", false, func(c *Config, v string) error {
		c.AllowedOrigins = splitList(v)
		return nil
	}},
	{"SUNDIAL_QUEUES", "default", "queues to serve, comma-separated, in priority order; q:3 gives a weight (weighted random order instead of strict)", false, func(c *Config, v string) error {
		qs, err := ParseQueues(v)
		c.Queues = qs
		return err
	}},
	{"SUNDIAL_CONCURRENCY", "10", "worker: jobs run at once (1..10000)", false, intVar(1, 10000, func(c *Config, n int) { c.Concurrency = n })},
	{egress.Variable, "", "worker: what the sundial.http job type may reach besides public addresses, comma-separated: host names (api.example.com, hooks.example.com:8443), patterns (*.example.com), addresses (10.0.0.5, [::1]:8080) and CIDR prefixes (10.1.0.0/16); * = every public address, allowed anyway. Loopback, private, link-local (cloud metadata), shared, multicast and unspecified addresses are refused unless listed: a name allows whatever it resolves to, an address or prefix allows those addresses (docs/security.md)", false, func(c *Config, v string) error {
		p, err := egress.ParsePolicy(v)
		c.HTTPJobAllow = p
		return err
	}},
	{envelope.EnvKeyring, "", "worker: the keyring that decrypts encrypted payloads and encrypts their results and error text, comma-separated <id>:<base64 of 32 bytes>, ids of 1 to 64 of [A-Za-z0-9_.-]; keep old keys when rotating (docs/payloads.md, \"Encryption\")", true, func(c *Config, v string) error {
		c.keyring = v
		return nil
	}},
	{envelope.EnvKeyringFile, "", "worker: a file holding the keyring instead, one <id>:<base64> a line (set this or SUNDIAL_KEYRING)", false, func(c *Config, v string) error {
		c.keyringFile = v
		return nil
	}},
	{envelope.EnvPrimary, "", "worker: the id of the keyring's key that encrypts; empty = the last one listed", false, func(c *Config, v string) error {
		c.keyringPrimary = v
		return nil
	}},
	{"SUNDIAL_MAX_BODY_BYTES", "1048576", "largest request body; the batch endpoint allows 16×", false, func(c *Config, v string) error {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1024 || n > 1<<30 {
			return fmt.Errorf("must be a number of bytes between 1024 and 1073741824")
		}
		c.MaxBodyBytes, c.MaxBatchBodyBytes = n, 16*n
		return nil
	}},
	{"SUNDIAL_LOG_LEVEL", "info", "debug, info, warn or error", false, func(c *Config, v string) error {
		return c.LogLevel.UnmarshalText([]byte(v))
	}},
	{"SUNDIAL_LOG_FORMAT", "text", "text or json", false, func(c *Config, v string) error {
		if v != "text" && v != "json" {
			return fmt.Errorf("must be text or json")
		}
		c.LogFormat = v
		return nil
	}},
	{"SUNDIAL_REQUEST_TIMEOUT", "1s", "API: how long a request may wait for Redis before it answers 503 unavailable (a Redis that accepts bytes and answers nothing); long polls, the stream, bulk actions and history searches are exempt; batch and workflow submits (one call per chunk or stage) get ten times it", false, durVar(100*time.Millisecond, time.Minute, func(c *Config, d time.Duration) { c.RequestTimeout = d })},
	{"SUNDIAL_SHUTDOWN_TIMEOUT", "30s", "how long a stopping process waits for running jobs and requests before giving their leases back", false, durVar(0, 24*time.Hour, func(c *Config, d time.Duration) { c.ShutdownTimeout = d })},
	{"SUNDIAL_JOB_RETENTION", "24h", "poller: how long succeeded and cancelled jobs stay in Redis (history keeps them in MongoDB)", false, durVar(time.Second, 365*24*time.Hour, func(c *Config, d time.Duration) { c.JobRetention = d })},
	{"SUNDIAL_LEASE_TTL", "15s", "how long a job's lease lasts unrenewed: workers renew it every third of this while the job runs, so a dead worker's jobs come back within it whatever their timeout; a worker that cannot renew stops the handler at four fifths of it, and a restarted or promoted Redis claims nothing for this long (docs/operations.md, Leases)", false, durVar(time.Second, time.Hour, func(c *Config, d time.Duration) { c.LeaseTTL = d })},
	{"SUNDIAL_JOB_LOG_LINES", "1000", "how many log lines a job keeps (what its handler logged, docs/concepts.md \"Job logs\"); older ones are dropped first and counted", false, intVar(1, 100000, func(c *Config, n int) { c.JobLogLines = n })},
	{"SUNDIAL_LEASE_GRACE", "5s", "how long past a job's timeout its worker keeps renewing the lease so the handler can still report; after that the job is retried", false, durVar(100*time.Millisecond, time.Hour, func(c *Config, d time.Duration) { c.LeaseGrace = d })},
	{"SUNDIAL_EVENTS_MAXLEN", "0", "hard cap of each queue's event stream; 0 = none with SUNDIAL_HISTORY=on (an event leaves Redis only once recorded) and 100000 with history off; events a cap drops unrecorded are counted (sundial_events_dropped_total) and logged", false, func(c *Config, v string) error {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || (n != 0 && n < 1000) || n > 1_000_000_000 {
			return fmt.Errorf("must be 0 or a number between 1000 and 1000000000")
		}
		c.EventsMaxLen = n
		return nil
	}},
	{"SUNDIAL_DEAD_RETENTION", "2160h", "poller: how long dead jobs stay in Redis (history keeps them in MongoDB)", false, durVar(time.Minute, 10*365*24*time.Hour, func(c *Config, d time.Duration) { c.DeadRetention = d })},
	{"SUNDIAL_DEAD_MAX", "10000", "poller: the most dead jobs each queue keeps in Redis, oldest deleted first (0 = no count bound)", false, intVar(0, 100_000, func(c *Config, n int) { c.DeadMax = n })},
	{"SUNDIAL_UNHANDLED_TIMEOUT", "24h", "poller: how long a queued job whose type no live worker of its queue handles waits before it ends dead with last_error no handler for type \"X\" (counted from when a worker passed it over; retry it from the dead set once a handler runs)", false, durVar(time.Second, 365*24*time.Hour, func(c *Config, d time.Duration) { c.UnhandledTimeout = d })},
	{"SUNDIAL_BATCH_RECOUNT_AFTER", "1m", "poller: how long a sealed batch's count of ended members may stay still before the poller recounts its members from their jobs (ends the relay never brought); the wait then doubles while it stays still, up to 1 h", false, durVar(time.Second, 24*time.Hour, func(c *Config, d time.Duration) { c.BatchRecountAfter = d })},
	{"SUNDIAL_METRICS_ADDR", "auto", "worker and poller: host:port of their /metrics, /healthz and /readyz (auto = the first free port of 127.0.0.1:9092… for a worker, 127.0.0.1:9091… for a poller, then any free port; off = none; port 0 = any free port; a worker's shows in GET /v1/workers as metrics_url); the API serves them on SUNDIAL_HTTP_ADDR", false, addrVar(func(c *Config, v string) { c.MetricsAddr = v }, "auto", "off")},
	{"SUNDIAL_PPROF_ADDR", "off", "API, worker and poller: host:port of Go's profiling endpoints (/debug/pprof/: CPU, heap, goroutines, execution trace) on a listener of their own (off = none; port 0 = any free port). No authentication: bind it to loopback or a private network", false, addrVar(func(c *Config, v string) { c.PprofAddr = v }, "off")},
	{"SUNDIAL_HEARTBEAT_INTERVAL", "5s", "worker registry heartbeat; a worker missing 3 beats is dropped from the list", false, durVar(100*time.Millisecond, time.Minute, func(c *Config, d time.Duration) { c.HeartbeatInterval = d })},
	{"SUNDIAL_HISTORY", "on", "on: the poller writes every job event to MongoDB and the API answers history queries; off: no MongoDB at all", false, func(c *Config, v string) error {
		switch v {
		case "on", "true", "1":
			c.History = true
		case "off", "false", "0":
			c.History = false
		default:
			return fmt.Errorf("must be on or off")
		}
		return nil
	}},
	{"SUNDIAL_HISTORY_RETENTION", "720h", "how long MongoDB keeps job records and events (TTL index; a janitor on FerretDB)", false, durVar(time.Hour, 100*365*24*time.Hour, func(c *Config, d time.Duration) { c.HistoryRetention = d })},
	{"SUNDIAL_AUDIT_RETENTION", "2160h", "api: how long the audit log (who changed what, refused attempts; collection audit of the history store) keeps a record (TTL index; a janitor on FerretDB); with SUNDIAL_HISTORY=off the records go to the API's log", false, durVar(time.Hour, 100*365*24*time.Hour, func(c *Config, d time.Duration) { c.AuditRetention = d })},
	{"SUNDIAL_OUTBOX_POSTGRES_URL", "", "poller: relay the sundialpg outbox of this PostgreSQL database (postgres:// URL or key=value DSN) to Redis; empty = no relay (docs/outbox.md)", true, func(c *Config, v string) error {
		c.OutboxPostgresURL = v
		return nil
	}},
	{"SUNDIAL_OUTBOX_MONGO_URI", "", "poller: relay the sundialmongo outbox of this MongoDB (a replica set: transactions) to Redis; empty = no relay (docs/outbox.md)", true, func(c *Config, v string) error {
		if v != "" && !strings.HasPrefix(v, "mongodb://") && !strings.HasPrefix(v, "mongodb+srv://") {
			return fmt.Errorf("must start with mongodb:// or mongodb+srv://")
		}
		c.OutboxMongoURI = v
		return nil
	}},
	{"SUNDIAL_OUTBOX_MONGO_DB", "sundial", "poller: the database holding the sundialmongo outbox collection", false, func(c *Config, v string) error {
		if v == "" || strings.ContainsAny(v, "/\\. \"$") {
			return fmt.Errorf("must be a valid database name")
		}
		c.OutboxMongoDB = v
		return nil
	}},
	{"SUNDIAL_WORKER_ID", "", "worker id; default <hostname>-<pid>", false, func(c *Config, v string) error {
		c.WorkerID = v
		return nil
	}},
}

// Load reads the environment through getenv (os.Getenv when nil) and
// returns the configuration, or an error naming every bad variable.
func Load(getenv func(string) string) (*Config, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	c := &Config{}
	var errs []string
	for _, v := range Vars {
		val := strings.TrimSpace(getenv(v.Name))
		if val == "" {
			val = v.Default
		}
		if err := v.set(c, val); err != nil {
			shown := val
			if v.Secret {
				shown = Mask(val)
			}
			errs = append(errs, fmt.Sprintf("%s=%q: %v", v.Name, shown, err))
		}
	}
	if c.OIDCIssuer != "" && (c.OIDCClientID == "" || c.OIDCRedirectURL == "") {
		errs = append(errs, "SUNDIAL_OIDC_ISSUER is set: SUNDIAL_OIDC_CLIENT_ID and SUNDIAL_OIDC_REDIRECT_URL are needed too")
	}
	if c.OIDCIssuer != "" && c.SessionSecret == "" && len(c.OIDCClientSecret) < 16 {
		errs = append(errs, "SUNDIAL_OIDC_ISSUER is set: SUNDIAL_SESSION_SECRET (16 bytes or more) is needed when SUNDIAL_OIDC_CLIENT_SECRET is shorter than 16 bytes")
	}
	kr, err := envelope.FromEnv(func(name string) string {
		return map[string]string{envelope.EnvKeyring: c.keyring, envelope.EnvKeyringFile: c.keyringFile, envelope.EnvPrimary: c.keyringPrimary}[name]
	})
	if err != nil {
		errs = append(errs, err.Error())
	}
	c.Keyring = kr
	if len(errs) > 0 {
		return nil, fmt.Errorf("invalid configuration:\n  %s", strings.Join(errs, "\n  "))
	}
	if c.WorkerID == "" {
		host, _ := os.Hostname()
		c.WorkerID = fmt.Sprintf("%s-%d", host, os.Getpid())
	}
	return c, nil
}

// Effective returns each variable's effective value as a string, with
// secrets masked, for the startup log.
func (c *Config) Effective(getenv func(string) string) []any {
	if getenv == nil {
		getenv = os.Getenv
	}
	var out []any
	for _, v := range Vars {
		val := getenv(v.Name)
		if val == "" {
			val = v.Default
		}
		if v.Secret {
			val = Mask(val)
		}
		out = append(out, slog.String(strings.ToLower(strings.TrimPrefix(v.Name, "SUNDIAL_")), val))
	}
	return out
}

// Mask hides passwords in URLs and whole API key lists.
func Mask(v string) string {
	if v == "" {
		return ""
	}
	if i := strings.Index(v, "://"); i >= 0 {
		rest := v[i+3:]
		if at := strings.LastIndex(rest, "@"); at >= 0 {
			return v[:i+3] + "****@" + rest[at+1:]
		}
		return v
	}
	return fmt.Sprintf("**** (%d keys)", len(splitList(v)))
}

// QueueNames returns the names of c.Queues.
func (c *Config) QueueNames() []string {
	out := make([]string, len(c.Queues))
	for i, q := range c.Queues {
		out[i] = q.Name
	}
	return out
}

// ParseQueues parses "a,b:3,c".
func ParseQueues(v string) ([]QueueWeight, error) {
	var out []QueueWeight
	seen := map[string]bool{}
	for _, part := range splitList(v) {
		name, w, hasW := strings.Cut(part, ":")
		weight := 1
		if hasW {
			n, err := strconv.Atoi(w)
			if err != nil || n < 1 || n > 1000 {
				return nil, fmt.Errorf("weight of %q must be 1..1000", name)
			}
			weight = n
		}
		if !validQueue(name) {
			return nil, fmt.Errorf("queue %q must match [a-z0-9_-]{1,64}", name)
		}
		if seen[name] {
			return nil, fmt.Errorf("queue %q listed twice", name)
		}
		seen[name] = true
		out = append(out, QueueWeight{Name: name, Weight: weight})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("name at least one queue")
	}
	return out, nil
}

func validQueue(s string) bool {
	if len(s) == 0 || len(s) > 64 {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
			return false
		}
	}
	return true
}

func splitList(v string) []string {
	var out []string
	for _, p := range strings.Split(v, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// addrVar accepts a listen address host:port, or one of words as it is.
func addrVar(set func(*Config, string), words ...string) func(*Config, string) error {
	want := "host:port"
	if len(words) > 0 {
		want = strings.Join(words, ", ") + " or host:port"
	}
	return func(c *Config, v string) error {
		if !slices.Contains(words, v) {
			if _, _, err := net.SplitHostPort(v); err != nil {
				return fmt.Errorf("must be %s", want)
			}
		}
		set(c, v)
		return nil
	}
}

func intVar(lo, hi int, set func(*Config, int)) func(*Config, string) error {
	return func(c *Config, v string) error {
		n, err := strconv.Atoi(v)
		if err != nil || n < lo || n > hi {
			return fmt.Errorf("must be a whole number between %d and %d", lo, hi)
		}
		set(c, n)
		return nil
	}
}

func durVar(lo, hi time.Duration, set func(*Config, time.Duration)) func(*Config, string) error {
	return func(c *Config, v string) error {
		d, err := time.ParseDuration(v)
		if err != nil || d < lo || d > hi {
			return fmt.Errorf("must be a duration such as 30s or 5m between %v and %v", lo, hi)
		}
		set(c, d)
		return nil
	}
}
