package worker

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sundialhq/sundial/pkg/job"
	"github.com/sundialhq/sundial/pkg/queue"
	"go.opentelemetry.io/otel/trace"
)

// Queue is a queue a worker serves, with a weight for weighted order.
type Queue struct {
	Name   string
	Weight int // ≤ 1 means 1
	// MaxConcurrency caps how many of the worker's running jobs come from
	// this queue (0: no cap but the worker's Concurrency), so that one
	// busy queue cannot take every slot from the others.
	MaxConcurrency int
}

// Config configures a Worker. Zero values take the documented defaults.
type Config struct {
	// Queues to serve. When every weight is 1 they are tried in the given
	// order (strict); otherwise each claim round orders them at random in
	// proportion to their weights. Default: "default".
	Queues []Queue
	// Concurrency is how many jobs run at once. Default 10.
	Concurrency int
	// ID names the worker in the registry and in job records. Default host-pid.
	ID string
	// ShutdownTimeout is how long Run waits for running jobs after its
	// context ends. At that deadline it writes the outcomes it already has
	// (for at most OutcomeFlushTimeout more), gives back the leases of jobs
	// still running, and returns whatever their handlers do. Default 30 s.
	ShutdownTimeout time.Duration
	// HeartbeatInterval is how often the worker renews its registry entry.
	// Default 5 s.
	HeartbeatInterval time.Duration
	// IdleWait bounds one blocking wait for new jobs; a safety net only, as
	// submits wake idle workers directly. A stopping worker may take this
	// long to notice, as a blocked Redis call cannot be interrupted.
	// Default 1 s.
	IdleWait time.Duration
	// Engine tunes the Redis engine (lease grace, event stream bound).
	Engine queue.Options
	// Logger receives the worker's logs. Default slog.Default().
	Logger *slog.Logger
	// TracerProvider makes the span of each attempt ("process <type>",
	// a child of the job's traceparent). Default: the global provider
	// (otel.GetTracerProvider()), which makes no spans, at no cost per
	// job, until an application sets one (docs/tracing.md); the no-op
	// provider turns the spans off at no cost per job.
	TracerProvider trace.TracerProvider
	// MetricsURL is where the process serves this worker's /metrics
	// (e.g. http://127.0.0.1:9093/metrics); the registry shows it, so
	// Prometheus finds every worker (GET /v1/workers/metrics-targets).
	// Default "": none.
	MetricsURL string
	// AfterAttempt, when set, is called after each attempt's outcome was
	// written, with the job as its handler saw it, the outcome and the
	// state the job reached (StatusStale: refused, the lease was lost). It
	// runs in the worker's outcome writer: keep it quick.
	AfterAttempt func(j *job.Job, o queue.Outcome, s queue.Status)
	// Encryption decrypts encrypted payloads before handlers see them and
	// encrypts those jobs' results and error text (encryption.go;
	// docs/payloads.md, "Encryption"). Without a keyring, a job whose
	// payload is encrypted goes dead.
	Encryption Encryption
}

func (c *Config) fill() {
	if len(c.Queues) == 0 {
		c.Queues = []Queue{{Name: job.DefaultQueue}}
	}
	for i := range c.Queues {
		c.Queues[i].Weight = max(c.Queues[i].Weight, 1)
	}
	if c.Concurrency <= 0 {
		c.Concurrency = 10
	}
	if len(c.Queues) == 1 && c.Queues[0].MaxConcurrency > 0 {
		// One queue: its cap is the worker's (the single-queue claims,
		// waitAndClaim and writeFused, count the worker's slots only).
		c.Concurrency = min(c.Concurrency, c.Queues[0].MaxConcurrency)
	}
	if c.ID == "" {
		host, _ := os.Hostname()
		c.ID = fmt.Sprintf("%s-%d", host, os.Getpid())
	}
	if c.ShutdownTimeout <= 0 {
		c.ShutdownTimeout = 30 * time.Second
	}
	if c.HeartbeatInterval <= 0 {
		c.HeartbeatInterval = 5 * time.Second
	}
	if c.IdleWait <= 0 {
		c.IdleWait = time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// Worker claims and runs jobs. Register handlers with Handle before Run.
type Worker struct {
	cfg      Config
	q        *queue.Client
	log      *slog.Logger
	handlers map[string]Handler
	// types are the handlers' types, sorted, fixed when Run starts: the
	// worker claims only jobs of these types (queue.Client.Claim), and
	// says so in the registry.
	types  []string
	mw     []Middleware
	tracer trace.Tracer // nil: tracing off
	// followGlobal: the tracer is the global provider's, whose spans are
	// skipped while no application has set one (tracing.go).
	followGlobal bool
	names        []string
	weighted     bool
	started      time.Time

	mu     sync.Mutex
	active map[string]*running
	// perQueue counts the running jobs of each queue that has a
	// MaxConcurrency (guarded by mu); caps holds those caps.
	perQueue map[string]int
	caps     map[string]int

	// Fused claims (see writeFused): a worker serving one queue claims
	// jobs for the slots its finished jobs freed in the call that reports
	// them. claimMu guards stopping against a fused claim starting jobs
	// while shutdown begins to wait for them.
	claimMu  sync.RWMutex
	stopping bool
	jobsCtx  context.Context
	jobsWG   *sync.WaitGroup

	slots      chan struct{} // one token per free slot
	outcomes   chan result
	pending    sync.WaitGroup // outcomes handed over but not yet written
	processed  atomic.Int64
	failed     atomic.Int64
	leasesLost atomic.Int64
	metrics    workerMetrics // metrics.go
}

// running is one attempt: a job under one lease (a job and a token). A
// job may have two attempts on one worker at once, when an attempt that
// lost its lease ignores its context while the job's next attempt runs:
// the worker's active map holds the newest, and an older one never
// removes it (finish).
type running struct {
	queue      string
	lease      queue.Lease
	cancel     context.CancelCauseFunc
	renewUntil time.Time // the job's timeout plus the lease grace
	// Guarded by Worker.mu: returned is set when the handler returned (its
	// outcome is the completer's to write); givenBack when shutdown gave the
	// lease back (the handler's outcome, if any, is dropped); expired when
	// the lease guard stopped the handler (its outcome is dropped too).
	returned, givenBack, expired bool
	// cancelled: the job was cancelled through the API; its lease is gone
	// on Redis, so LeaseOf reports it not held from that instant.
	cancelled bool
	// uncounted (guarded by Worker.mu): finish took it off its queue's
	// running count (Queue.MaxConcurrency).
	uncounted bool
	// heldUntil (guarded by Worker.mu) is when this worker stops trusting
	// the lease, on its own monotonic clock: the send time of the claim or
	// of the last renewal Redis accepted, plus the lease TTL, less
	// Worker.leaseMargin. Redis' lease cannot expire before then.
	heldUntil time.Time
}

// dispatchGrace bounds how long a stopping worker waits, after giving its
// leases back, for a claim that was blocked in a wait for work to give
// back what it claimed meanwhile.
const dispatchGrace = 150 * time.Millisecond

// OutcomeFlushTimeout bounds how long a stopping worker keeps trying to
// write outcomes it already has, past its ShutdownTimeout.
const OutcomeFlushTimeout = 5 * time.Second

type result struct {
	queue   string
	outcome queue.Outcome
	r       *running
}

// errCancelled is the cause set on a job's context when the job is cancelled.
var errCancelled = errors.New("job cancelled")

// errShutdown is the cause set when the worker gives the job back.
var errShutdown = errors.New("worker shutting down")

// errLeaseLost is the cause set when a renewal finds the lease gone.
var errLeaseLost = ErrLeaseLost

// errLeaseExpired is the cause set when the worker could not renew a lease
// in time (Redis unreachable, the process paused): the lease may expire on
// Redis at any moment, and another worker may then start the job.
var errLeaseExpired = fmt.Errorf("%w: not renewed in time, it may have expired", ErrLeaseLost)

// dropped tells whether the cause set on a job's context means its outcome
// must not be reported: cancelled, given back, or its lease lost.
func dropped(cause error) bool {
	return errors.Is(cause, errCancelled) || errors.Is(cause, errShutdown) || errors.Is(cause, ErrLeaseLost)
}

// New returns a Worker over rdb.
func New(rdb redis.UniversalClient, cfg Config) *Worker {
	cfg.fill()
	w := &Worker{
		cfg:      cfg,
		q:        queue.New(rdb, cfg.Engine),
		log:      cfg.Logger.With("worker_id", cfg.ID),
		handlers: map[string]Handler{},
		tracer:   newTracer(cfg.TracerProvider),
		// The global provider may still be set after New (its tracers
		// then forward to the one set).
		followGlobal: cfg.TracerProvider == nil,
		active:       map[string]*running{},
		slots:        make(chan struct{}, cfg.Concurrency),
		outcomes:     make(chan result, cfg.Concurrency),
	}
	for _, q := range cfg.Queues {
		w.names = append(w.names, q.Name)
		if q.Weight > 1 {
			w.weighted = true
		}
		if q.MaxConcurrency > 0 && q.MaxConcurrency < cfg.Concurrency {
			if w.caps == nil {
				w.caps, w.perQueue = map[string]int{}, map[string]int{}
			}
			w.caps[q.Name] = q.MaxConcurrency
		}
	}
	for i := 0; i < cfg.Concurrency; i++ {
		w.slots <- struct{}{}
	}
	return w
}

// ID returns the worker's id.
func (w *Worker) ID() string { return w.cfg.ID }

// Handle registers h for jobs of type typ, replacing any earlier one.
func (w *Worker) Handle(typ string, h Handler) { w.handlers[typ] = h }

// HandleFunc registers f for jobs of type typ.
func (w *Worker) HandleFunc(typ string, f func(ctx context.Context, j *job.Job) (any, error)) {
	w.Handle(typ, HandlerFunc(f))
}

// Use adds middleware around every handler; the first added is outermost.
func (w *Worker) Use(mw ...Middleware) { w.mw = append(w.mw, mw...) }

// Run claims and runs jobs until ctx ends, then shuts down gracefully: it
// stops claiming, waits up to ShutdownTimeout for running jobs, gives the
// leases of the rest back so they are requeued at once, and returns nil.
// It registers the worker as a reader of the storage format for as long
// as it runs (queue.Client.Register): when the Redis holds a format this
// release does not read, it shuts down the same way, having written
// nothing more, and returns the *queue.FormatError.
func (w *Worker) Run(ctx context.Context) error {
	w.started = time.Now().UTC()
	w.types = slices.Sorted(maps.Keys(w.handlers))
	ctx, reg := w.q.Register(ctx, "worker", w.log)
	defer reg.Close()
	// Jobs run under their own context, cancelled only past the deadline.
	jobsCtx, stopJobs := context.WithCancelCause(context.WithoutCancel(ctx))
	defer stopJobs(errShutdown)
	var jobsWG sync.WaitGroup
	w.jobsCtx, w.jobsWG = jobsCtx, &jobsWG
	bg, stopBG := context.WithCancel(context.WithoutCancel(ctx))
	var bgWG sync.WaitGroup
	bgWG.Add(5)
	go func() { defer bgWG.Done(); w.complete(bg) }()
	go func() { defer bgWG.Done(); w.renew(bg) }()
	go func() { defer bgWG.Done(); w.guardLeases(bg) }()
	go func() { defer bgWG.Done(); w.heartbeat(bg) }()
	go func() { defer bgWG.Done(); w.watchCancels(bg) }()

	// The shutdown deadline counts from the moment ctx ends, not from when
	// the claim loop noticed (a blocked wait for work may take IdleWait).
	deadline := make(chan struct{})
	var deadlineTimer atomic.Pointer[time.Timer]
	stopAfter := context.AfterFunc(ctx, func() {
		deadlineTimer.Store(time.AfterFunc(w.cfg.ShutdownTimeout, func() { close(deadline) }))
	})
	defer func() {
		if !stopAfter() {
			if t := deadlineTimer.Load(); t != nil {
				t.Stop()
			}
		}
	}()

	w.log.Info("worker started", "queues", w.names, "concurrency", w.cfg.Concurrency)
	dispatched := make(chan struct{})
	go func() { defer close(dispatched); w.dispatch(ctx, jobsCtx, &jobsWG) }()
	select {
	case <-dispatched:
	case <-deadline:
		// The claim loop is still blocked in a wait for work: its claim, if
		// any, gives its leases back itself (waitAndClaim).
	}
	w.claimMu.Lock() // no fused claim starts a job from here on
	w.stopping = true
	w.claimMu.Unlock()

	// Shutdown: wait for running jobs until the deadline.
	w.log.Info("worker stopping", "running", w.activeCount(), "timeout", w.cfg.ShutdownTimeout)
	done := make(chan struct{})
	go func() { jobsWG.Wait(); close(done) }()
	var giveBack map[string][]queue.Lease
	select {
	case <-done:
	case <-deadline:
		// From here on a handler that returns reports nothing: its lease
		// goes back (after the known outcomes are written, below).
		giveBack = w.markGivenBack()
		stopJobs(errShutdown)
		// A lease goes back only once its handler returned, or after the
		// margin a lost lease leaves a handler to stop (leaseMargin): a
		// job given back at once would run elsewhere while its cancelled
		// handler here still unwinds.
		if len(giveBack) > 0 {
			select {
			case <-done:
			case <-time.After(w.leaseMargin()):
				w.log.Warn("handlers still running a lease margin after their context ended; giving their leases back", "margin", w.leaseMargin())
			}
		}
	}
	// Write the outcomes already known before any lease is given back, for
	// at most OutcomeFlushTimeout (Redis unreachable: those leases expire
	// and the poller retries the jobs).
	written := make(chan struct{})
	go func() { w.pending.Wait(); close(written) }()
	select {
	case <-written:
	case <-time.After(OutcomeFlushTimeout):
		w.log.Error("could not report every outcome in time; their leases will expire")
	}
	stopBG()
	bgWG.Wait()
	w.release(context.WithoutCancel(ctx), giveBack)
	// A claim still blocked in a wait for work (sent before the stop,
	// pipelined behind its BLPOP) runs when the wait ends, and the release
	// above wakes it: give it a moment to hand its leases back itself while
	// the Redis client is still open, rather than leave them to expire.
	select {
	case <-dispatched:
	case <-time.After(dispatchGrace):
	}
	uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	if err := w.q.Unregister(uctx, w.cfg.ID); err != nil {
		w.log.Warn("unregister worker", "err", err)
	}
	w.log.Info("worker stopped", "processed", w.processed.Load(), "failed", w.failed.Load())
	return reg.Close()
}

// dispatch is the claim loop: while a slot is free it claims as many jobs
// as there are free slots; when no job is due it blocks on the queues'
// signal lists until a submit wakes it.
func (w *Worker) dispatch(ctx, jobsCtx context.Context, wg *sync.WaitGroup) {
	errDelay := 10 * time.Millisecond
	idle := false // the last round waited and claimed nothing
	for {
		// Wait for one free slot, then take every other free one.
		select {
		case <-ctx.Done():
			return
		case <-w.slots:
		}
		// Let handlers that are about to return their slots do so, so that
		// one claim takes them all (no wait: a yield to runnable goroutines).
		runtime.Gosched()
		free := 1
	take:
		for {
			select {
			case <-w.slots:
				free++
			default:
				break take
			}
		}
		var claimed int
		var err error
		if !idle {
			claimed, err = w.claim(ctx, jobsCtx, free, wg)
		}
		waited := false
		if err == nil && claimed == 0 && len(w.names) == 1 && ctx.Err() == nil {
			// Nothing due: wait, keeping the free slots, and claim in the
			// same round trip as the wake-up. After a wait that found
			// nothing, the next round waits at once: its claim just ran.
			claimed, err = w.waitAndClaim(ctx, jobsCtx, free, wg)
			waited = true
		}
		idle = waited && err == nil && claimed == 0
		for i := claimed; i < free; i++ {
			w.slots <- struct{}{}
		}
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			w.log.Warn("claim failed; retrying", "err", err, "in", errDelay)
			sleepCtx(ctx, errDelay)
			errDelay = min(2*errDelay, 2*time.Second)
			continue
		}
		errDelay = 10 * time.Millisecond
		if claimed == 0 && !waited {
			open := w.openQueues()
			if len(open) == 0 {
				// Every queue is at its MaxConcurrency: wait for one of
				// their jobs to end.
				sleepCtx(ctx, 20*time.Millisecond)
				continue
			}
			if _, err := w.q.WaitForWork(ctx, open, w.cfg.IdleWait); err != nil && ctx.Err() == nil {
				w.log.Warn("wait for work failed", "err", err)
				sleepCtx(ctx, errDelay)
			}
		}
	}
}

// claim claims up to free jobs over the queues in order and starts them.
// A queue whose Redis fails (one shard of a cluster failing over) does not
// stop the others: claim reports an error only when no queue answered.
func (w *Worker) claim(ctx, jobsCtx context.Context, free int, wg *sync.WaitGroup) (int, error) {
	claimed, tried := 0, 0
	var failed []string
	var firstErr error
	for _, name := range w.order() {
		if claimed == free {
			break
		}
		n := w.room(name, free-claimed)
		if n == 0 {
			continue
		}
		tried++
		sent := time.Now()
		leases, err := w.q.Claim(ctx, name, n, w.cfg.ID, w.types...)
		if err != nil {
			failed = append(failed, name)
			firstErr = cmp.Or(firstErr, err)
			continue
		}
		for _, l := range leases {
			claimed++
			w.start(jobsCtx, name, l, sent, wg)
		}
	}
	if firstErr != nil && len(failed) < tried {
		w.log.Warn("claim failed on some queues; serving the others", "queues", failed, "err", firstErr)
		return claimed, nil
	}
	return claimed, firstErr
}

// openQueues returns the worker's queues that are below their
// MaxConcurrency (all of them when none has one).
func (w *Worker) openQueues() []string {
	if w.caps == nil {
		return w.names
	}
	open := make([]string, 0, len(w.names))
	for _, q := range w.names {
		if w.room(q, 1) > 0 {
			open = append(open, q)
		}
	}
	return open
}

// room is how many more jobs of queue the worker may start, at most n:
// n, or less under the queue's MaxConcurrency.
func (w *Worker) room(queue string, n int) int {
	c, ok := w.caps[queue]
	if !ok {
		return n
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return max(min(n, c-w.perQueue[queue]), 0)
}

// waitAndClaim waits for work on the worker's one queue and claims up to
// free jobs in the same round trip (queue.Client.WaitAndClaim), and starts
// them. Jobs whose claim ran after the worker began to stop are given back
// at once instead.
func (w *Worker) waitAndClaim(ctx, jobsCtx context.Context, free int, wg *sync.WaitGroup) (int, error) {
	name := w.names[0]
	sent := time.Now()
	leases, err := w.q.WaitAndClaim(ctx, name, free, w.cfg.ID, w.cfg.IdleWait, w.types...)
	if len(leases) > 0 && ctx.Err() != nil {
		w.release(context.WithoutCancel(ctx), map[string][]queue.Lease{name: leases})
		return 0, nil
	}
	if len(leases) > 0 && time.Since(sent) > w.leaseMargin() {
		// The claim ran when the wait ended, at some moment after it was
		// sent: the send time bounds its lease from below, by as much as
		// the wait lasted. A renewal now gives a bound from now.
		leases = w.renewClaimed(ctx, name, leases, &sent)
	}
	for _, l := range leases {
		w.start(jobsCtx, name, l, sent, wg)
	}
	return len(leases), err
}

// renewClaimed renews leases just claimed and, when Redis answered, moves
// *sent to the renewal's send time; it returns the leases still held (a
// lease lost already is not started).
func (w *Worker) renewClaimed(ctx context.Context, name string, leases []queue.Lease, sent *time.Time) []queue.Lease {
	at := time.Now()
	held, err := w.q.Extend(context.WithoutCancel(ctx), name, leases)
	if err != nil {
		return leases // the lease guard stops them if no renewal gets through
	}
	*sent = at
	kept := leases[:0]
	for i, l := range leases {
		if held[i] {
			kept = append(kept, l)
		}
	}
	return kept
}

// order returns the queues in the order to try them this round.
func (w *Worker) order() []string {
	if !w.weighted {
		return w.names
	}
	qs := append([]Queue(nil), w.cfg.Queues...)
	out := make([]string, 0, len(qs))
	for len(qs) > 0 {
		total := 0
		for _, q := range qs {
			total += q.Weight
		}
		r := rand.IntN(total)
		for i, q := range qs {
			if r < q.Weight {
				out = append(out, q.Name)
				qs = append(qs[:i], qs[i+1:]...)
				break
			}
			r -= q.Weight
		}
	}
	return out
}

// start runs the attempt of lease l, claimed by a call sent at sent.
func (w *Worker) start(jobsCtx context.Context, queueName string, l queue.Lease, sent time.Time, wg *sync.WaitGroup) {
	ctx, cancel := context.WithCancelCause(jobsCtx)
	r := &running{queue: queueName, lease: l, cancel: cancel,
		renewUntil: time.Now().Add(l.Job.Timeout() + w.q.Options().LeaseGrace),
		heldUntil:  w.heldUntil(sent)}
	rj := &runningJob{w: w, r: r}
	rj.logs.send = w.sendLogs(r)
	ctx = context.WithValue(ctx, runningKey{}, rj)
	w.observeStart(queueName, l)
	w.mu.Lock()
	w.active[l.Job.ID] = r
	if _, ok := w.caps[queueName]; ok {
		w.perQueue[queueName]++
	}
	w.mu.Unlock()
	wg.Add(1)
	go func() {
		defer wg.Done()
		o, report := w.execute(ctx, l)
		// The attempt's log lines go before its outcome, while its
		// token is still the running one.
		rj.logs.flush(context.WithoutCancel(jobsCtx))
		cancel(nil)
		w.mu.Lock()
		r.returned = true
		if r.givenBack || r.expired {
			report = false
		}
		if report {
			// Counted under the lock, so that once shutdown marked the
			// running jobs given back no outcome is added while it waits.
			w.pending.Add(1)
		}
		w.mu.Unlock()
		if report {
			// The slot frees as soon as the handler returns, so the next
			// claim overlaps with writing this outcome. The outcomes
			// channel is bounded: a slow Redis blocks here, which stops
			// claims too.
			w.outcomes <- result{queue: queueName, outcome: o, r: r}
		} else {
			w.finish(r)
		}
		w.slots <- struct{}{}
	}()
}

// execute runs the handler for one lease and returns the outcome to report,
// or report=false when the job was cancelled or given back meanwhile.
func (w *Worker) execute(ctx context.Context, l queue.Lease) (o queue.Outcome, report bool) {
	j := l.Job
	if sctx, span := w.startSpan(ctx, j); span != nil {
		defer func() { endSpan(span, o, report, context.Cause(ctx)) }()
		ctx = sctx
	}
	o = queue.Outcome{ID: j.ID, Token: l.Token, WorkerID: w.cfg.ID}
	h, ok := w.handlers[j.Type]
	if !ok {
		o.Kind, o.Error = queue.OutcomeDead, fmt.Sprintf("no handler for type %q", j.Type)
		return o, true
	}
	encrypted, err := w.cfg.Encryption.open(j)
	if err != nil {
		o.Kind, o.Error = queue.OutcomeDead, err.Error()
		return o, true
	}
	if encrypted {
		defer func() { w.cfg.Encryption.seal(&o) }()
	}
	for i := len(w.mw) - 1; i >= 0; i-- {
		h = w.mw[i](h)
	}
	tctx, cancel := context.WithTimeout(ctx, j.Timeout())
	defer cancel()
	res, err := w.call(tctx, h, j)
	if dropped(context.Cause(ctx)) {
		return o, false
	}
	if err == nil {
		b, merr := json.Marshal(res)
		if res == nil {
			b, merr = nil, nil
		}
		if merr != nil {
			err = NoRetry(fmt.Errorf("result is not JSON-encodable: %v", merr))
		} else {
			o.Kind, o.Result = queue.OutcomeSucceeded, b
			return o, true
		}
	}
	if ctx.Err() == nil && errors.Is(tctx.Err(), context.DeadlineExceeded) {
		err = fmt.Errorf("timeout after %ds: %w", j.TimeoutSeconds, err)
	}
	outcomeOf(&o, err)
	return o, true
}

// call runs h, turning a panic into a failed attempt; the stack goes to the
// log, not into the job.
func (w *Worker) call(ctx context.Context, h Handler, j *job.Job) (res any, err error) {
	defer func() {
		if r := recover(); r != nil {
			w.log.Error("handler panicked", "job_id", j.ID, "type", j.Type, "attempt", j.Attempt, "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
			res, err = nil, fmt.Errorf("handler panicked: %v", r)
		}
	}()
	return h.Work(ctx, j)
}

// complete writes outcomes in batches: it takes what is waiting and writes
// one script call per queue.
func (w *Worker) complete(ctx context.Context) {
	batch := make([]result, 0, w.cfg.Concurrency)
	for {
		var first result
		select {
		case <-ctx.Done():
			// Shutdown gave up on these: their leases expire instead.
			for {
				select {
				case r := <-w.outcomes:
					w.finish(r.r)
					w.pending.Done()
				default:
					return
				}
			}
		case first = <-w.outcomes:
		}
		runtime.Gosched() // as in dispatch: let finishing handlers hand over theirs
		batch = append(batch[:0], first)
	more:
		for len(batch) < cap(batch) {
			select {
			case r := <-w.outcomes:
				batch = append(batch, r)
			default:
				break more
			}
		}
		w.write(ctx, batch)
		for _, r := range batch {
			w.finish(r.r)
			w.pending.Done()
		}
	}
}

// write reports a batch of outcomes, retrying while Redis is unreachable.
// If it cannot before ctx ends, the leases expire and the poller retries
// the jobs (at least once).
func (w *Worker) write(ctx context.Context, batch []result) {
	byQueue := map[string][]queue.Outcome{}
	jobs := map[string][]*job.Job{}
	for _, r := range batch {
		byQueue[r.queue] = append(byQueue[r.queue], r.outcome)
		jobs[r.queue] = append(jobs[r.queue], r.r.lease.Job)
	}
	for name, outs := range byQueue {
		delay := 10 * time.Millisecond
		for {
			st, err := w.writeFused(ctx, name, outs)
			if err == nil {
				for i, s := range st {
					w.record(outs[i], s)
					if w.cfg.AfterAttempt != nil {
						w.cfg.AfterAttempt(jobs[name][i], outs[i], s)
					}
				}
				break
			}
			if ctx.Err() != nil {
				return
			}
			w.log.Warn("reporting outcomes failed; retrying", "queue", name, "jobs", len(outs), "err", err)
			sleepCtx(ctx, delay)
			delay = min(2*delay, 2*time.Second)
		}
	}
}

// writeFused reports outcomes of a queue in one call. A worker serving a
// single queue also claims, in the same call, jobs for the slots that are
// free (those the reported jobs freed, unless the claim loop took them
// first) and starts them: one round trip per cycle instead of two. With
// several queues a claim must try them in order, so the claim loop does it.
func (w *Worker) writeFused(ctx context.Context, name string, outs []queue.Outcome) ([]queue.Status, error) {
	if len(w.names) != 1 || w.weighted {
		return w.q.Complete(ctx, name, outs)
	}
	w.claimMu.RLock()
	defer w.claimMu.RUnlock()
	free := 0
	if !w.stopping {
	take:
		for free < len(outs) {
			select {
			case <-w.slots:
				free++
			default:
				break take
			}
		}
	}
	sent := time.Now()
	st, leases, err := w.q.CompleteAndClaim(ctx, name, outs, free, w.cfg.ID, w.types...)
	if err != nil {
		leases = nil
	}
	for _, l := range leases {
		w.start(w.jobsCtx, name, l, sent, w.jobsWG)
	}
	for i := len(leases); i < free; i++ {
		w.slots <- struct{}{}
	}
	return st, err
}

func (w *Worker) record(o queue.Outcome, s queue.Status) {
	w.processed.Add(1)
	switch s {
	case queue.StatusStale:
		w.log.Warn("outcome refused: lease lost", "job_id", o.ID)
	case queue.StatusSucceeded:
	case queue.StatusCancelled:
		w.log.Info("job cancelled by its handler", "job_id", o.ID, "reason", o.Error)
	case queue.StatusQueued, queue.StatusScheduled:
		switch o.Kind {
		case queue.OutcomeSnoozed:
			w.log.Debug("job snoozed", "job_id", o.ID, "for", o.Delay)
			return
		case queue.OutcomeParked:
			w.log.Debug("durable job parked", "job_id", o.ID, "waits_for", o.Error, "at_most", o.Delay)
			return
		}
		fallthrough
	default:
		w.failed.Add(1)
		w.log.Info("attempt failed", "job_id", o.ID, "status", string(s), "error", o.Error)
	}
}

// finish forgets attempt r, unless the job's entry is already a newer
// attempt's (r lost its lease and the job was claimed again).
func (w *Worker) finish(r *running) {
	id := r.lease.Job.ID
	w.mu.Lock()
	if w.active[id] == r {
		delete(w.active, id)
	}
	if _, ok := w.caps[r.queue]; ok && !r.uncounted {
		r.uncounted = true
		w.perQueue[r.queue]--
	}
	w.mu.Unlock()
}

func (w *Worker) activeCount() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.active)
}

// markGivenBack marks every job whose handler is still running as given
// back and returns their leases by queue. Jobs whose handler returned keep
// their lease: their outcome is written instead.
func (w *Worker) markGivenBack() map[string][]queue.Lease {
	byQueue := map[string][]queue.Lease{}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, r := range w.active {
		if !r.returned && !r.expired {
			r.givenBack = true
			byQueue[r.queue] = append(byQueue[r.queue], r.lease)
		}
	}
	return byQueue
}

// release gives leases back so that their jobs are requeued at once.
func (w *Worker) release(ctx context.Context, byQueue map[string][]queue.Lease) {
	ctx, cancel := context.WithTimeout(ctx, OutcomeFlushTimeout)
	defer cancel()
	for name, leases := range byQueue {
		n, err := w.q.Release(ctx, name, leases)
		if err != nil {
			w.log.Error("giving leases back failed; they will expire", "queue", name, "jobs", len(leases), "err", err)
			continue
		}
		w.log.Info("gave leases back", "queue", name, "jobs", n)
	}
}

// renew extends the leases of running jobs every third of the lease TTL,
// one script call per queue for all of them. A job past its timeout plus
// the lease grace is no longer renewed: if its handler ignores its
// deadline, the lease runs out and the poller retries the job. A lease
// found lost stops its handler.
func (w *Worker) renew(ctx context.Context) {
	every(ctx, w.q.Options().LeaseTTL/3, func() {
		now := time.Now()
		byQueue := map[string][]*running{}
		w.mu.Lock()
		for _, r := range w.active {
			if !r.returned && !r.givenBack && !r.expired && now.Before(r.renewUntil) {
				byQueue[r.queue] = append(byQueue[r.queue], r)
			}
		}
		w.mu.Unlock()
		for name, rs := range byQueue {
			leases := make([]queue.Lease, len(rs))
			for i, r := range rs {
				leases[i] = r.lease
			}
			sent := time.Now()
			held, err := w.q.Extend(ctx, name, leases)
			if err != nil {
				if ctx.Err() == nil {
					w.log.Warn("renewing leases failed; retrying at the next beat", "queue", name, "jobs", len(rs), "err", err)
				}
				continue
			}
			w.renewed(rs, held, sent)
			for _, r := range w.lost(rs, held) {
				w.log.Warn("lease lost; stopping the job", "job_id", r.lease.Job.ID, "queue", name)
				w.leasesLost.Add(1)
				r.cancel(errLeaseLost)
			}
		}
	})
}

// leaseMargin is how long before the earliest moment its lease could
// expire on Redis a worker stops trusting it: a fifth of the lease TTL
// (3 s of the default 15 s). It covers the guard's tick and leaves the
// handler that long to return after its context ends.
func (w *Worker) leaseMargin() time.Duration { return w.q.Options().LeaseTTL / 5 }

// heldUntil is when a lease granted or renewed by a call sent at sent stops
// being trusted: Redis set its expiry to its own clock at the call plus
// the TTL, and the call ran after it was sent, so on any clock that runs
// at Redis' rate the lease lasts at least until sent + TTL.
func (w *Worker) heldUntil(sent time.Time) time.Time {
	return sent.Add(w.q.Options().LeaseTTL - w.leaseMargin())
}

// renewed moves the trusted end of the leases of rs that Redis renewed
// (held[i]) by a call sent at sent.
func (w *Worker) renewed(rs []*running, held []bool, sent time.Time) {
	until := w.heldUntil(sent)
	w.mu.Lock()
	defer w.mu.Unlock()
	for i, ok := range held {
		if ok && i < len(rs) && until.After(rs[i].heldUntil) {
			rs[i].heldUntil = until
		}
	}
}

// guardLeases stops the handler of every attempt whose lease this worker
// could not renew in time (heldUntil passed: Redis unreachable, the
// process paused), before the lease can have expired on Redis and another
// worker started the job; its outcome is then dropped. It checks every
// quarter of the lease margin.
func (w *Worker) guardLeases(ctx context.Context) {
	every(ctx, w.leaseMargin()/4, func() {
		now := time.Now()
		var stop []*running
		w.mu.Lock()
		for _, r := range w.active {
			if !r.returned && !r.givenBack && !r.expired && !now.Before(r.heldUntil) {
				r.expired = true
				stop = append(stop, r)
			}
		}
		w.mu.Unlock()
		for _, r := range stop {
			w.log.Warn("lease not renewed in time; stopping the job, whose outcome will not be reported", "job_id", r.lease.Job.ID, "queue", r.queue)
			w.leasesLost.Add(1)
			r.cancel(errLeaseExpired)
		}
	})
}

// lost returns the running jobs of rs whose renewal was refused (held[i]
// false) and whose handler is still running. A job whose handler returned
// between the renewal's snapshot and its call has usually had its outcome
// written by then, which ends the lease: that is not a loss (the outcome's
// own write reports a real one), nor is a lease shutdown gave back.
func (w *Worker) lost(rs []*running, held []bool) []*running {
	var out []*running
	w.mu.Lock()
	defer w.mu.Unlock()
	for i, ok := range held {
		if !ok && i < len(rs) && !rs[i].returned && !rs[i].givenBack {
			out = append(out, rs[i])
		}
	}
	return out
}

// watchCancels cancels the context of running jobs cancelled through the API.
func (w *Worker) watchCancels(ctx context.Context) {
	for id := range w.q.SubscribeCancels(ctx) {
		w.mu.Lock()
		r, ok := w.active[id]
		if ok {
			r.cancelled = true
		}
		w.mu.Unlock()
		if ok {
			w.log.Info("job cancelled while running", "job_id", id)
			r.cancel(errCancelled)
		}
	}
}

// heartbeat keeps the worker's registry entry fresh.
func (w *Worker) heartbeat(ctx context.Context) {
	t := time.NewTicker(w.cfg.HeartbeatInterval)
	defer t.Stop()
	host, _ := os.Hostname()
	for {
		w.mu.Lock()
		ids := make([]string, 0, len(w.active))
		for id := range w.active {
			ids = append(ids, id)
		}
		w.mu.Unlock()
		info := queue.WorkerInfo{
			ID: w.cfg.ID, Hostname: host, PID: os.Getpid(), Queues: w.names,
			Concurrency: w.cfg.Concurrency, ActiveJobs: ids, StartedAt: w.started,
			Processed: w.processed.Load(), Failed: w.failed.Load(),
			MetricsURL: w.cfg.MetricsURL, Types: w.types,
		}
		if err := w.q.Heartbeat(ctx, info, 3*w.cfg.HeartbeatInterval); err != nil && ctx.Err() == nil {
			w.log.Warn("heartbeat failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// every calls f every d until ctx ends.
func every(ctx context.Context, d time.Duration, f func()) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		f()
	}
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
