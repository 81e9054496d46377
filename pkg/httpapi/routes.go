package httpapi

import (
	"net/http"
	"slices"
	"strings"
	"sync"

	"github.com/gin-gonic/gin"
	"github.com/sundialhq/sundial/pkg/job"
	"github.com/sundialhq/sundial/pkg/queue"
	"go.opentelemetry.io/otel"
)

// route is one entry of the API's route table: the handler and the
// documentation the OpenAPI document is generated from.
type route struct {
	Method, Path string // Path in Gin's syntax: /v1/jobs/:id
	Handler      gin.HandlerFunc
	Doc          operation
}

// operation documents a route for the OpenAPI document.
type operation struct {
	ID, Tag, Summary, Description string
	// Public routes need no API key.
	Public bool
	// Scope is what the caller's key must allow (see auth.go); empty means
	// read for GET and admin for every other method.
	Scope string
	// Query lists the query parameters.
	Query []param
	// Body is a value of the request body's type; nil for none.
	// BodyOptional marks a body that may be left out.
	Body         any
	BodyOptional bool
	// Status is the success status and Response a value of its body's type
	// (JSON), or ContentType names another media type. Also lists further
	// success statuses with the same body.
	Status      int
	Response    any
	ContentType string
	Also        map[int]string
	// Errors lists the error statuses particular to the route; 401, 429
	// (on /v1) and 500 are added to every route.
	Errors []int
	// Long marks a route that may rightly take longer than
	// Config.RequestTimeout (a long poll, the stream, a chunked bulk action,
	// a history search): it runs without the request deadline.
	Long bool
	// Audit names the action a request of the route records in the audit
	// log ("job.cancel"); empty for routes that change nothing an operator
	// answers for (reads, submits, the worker protocol), which record only
	// their refusals.
	Audit string
	// Many marks a route that makes one Redis call per chunk or stage (a
	// batch, a workflow, each waiting for replicas): its deadline is
	// manyCalls request timeouts.
	Many bool
}

// manyCalls is how many request timeouts a route marked Many may take.
const manyCalls = 10

// scope returns the scope a route needs.
func (o operation) scope(method string) string {
	switch {
	case o.Scope != "":
		return o.Scope
	case method == http.MethodGet:
		return scopeRead
	case operatorAction(o.Audit):
		return scopeOperate
	}
	return scopeAdmin
}

// operatorAction reports whether an audited action is an operator's (the
// operate scope): acting on jobs, queues, dead letters, schedules and
// batches; limits and uniqueness stay admin's.
func operatorAction(action string) bool {
	for _, p := range []string{"job.", "jobs.", "dead.", "queue.", "schedule.", "batch."} {
		if strings.HasPrefix(action, p) {
			return true
		}
	}
	return false
}

// param is a query parameter.
type param struct {
	Name, Description string
	Schema            map[string]any
	Repeated          bool
}

var (
	queueSchema = map[string]any{"type": "string", "pattern": "^[a-z0-9_-]{1,64}$"}
	typeSchema  = map[string]any{"type": "string", "pattern": "^[A-Za-z0-9_.:-]{1,128}$"}
	idSchema    = map[string]any{"type": "string", "maxLength": 64}
	timeSchema  = map[string]any{"type": "string", "format": "date-time"}
	limitSchema = map[string]any{"type": "integer", "minimum": 1, "maximum": maxPageSize, "default": defaultPageSize}
	textSchema  = map[string]any{"type": "string"}
	limitParam  = param{"limit", "Page size.", limitSchema, false}
	cursorParam = param{"cursor", "The next_cursor of the previous page.", textSchema, false}
	tagParam    = param{"tag", "Only jobs with this tag.", map[string]any{"type": "string", "pattern": "^[A-Za-z0-9_.:=/-]{1,64}$"}, false}
)

// routes is the API's route table: every route the server registers, in
// documentation order.
func (s *Server) routes() []route {
	return slices.Concat([]route{
		{http.MethodPost, "/v1/jobs", s.submitJob, operation{
			ID: "submitJob", Tag: "jobs", Summary: "Submit a job", Scope: scopeSubmit,
			Description: "Validates and stores one job. The same idempotency_key in the same queue within 24 h answers 200 with the first job and creates nothing.",
			Body:        job.Spec{}, Status: http.StatusCreated, Response: job.Job{},
			Also:   map[int]string{http.StatusOK: "An earlier job with the same idempotency key; nothing new was created."},
			Errors: []int{400, 413, 415, 503},
		}},
		{http.MethodPost, "/v1/jobs/batch", s.submitBatch, operation{
			Many: true,
			ID:   "submitBatch", Tag: "jobs", Summary: "Submit up to 1000 jobs, all or nothing", Scope: scopeSubmit,
			Description: "One bad job rejects the batch with field \"jobs[i].x\". depends_on may name an earlier job of the batch as \"#0\", \"#1\"… An idempotent duplicate appears as the earlier job. Counts as one request for the rate limit; the body may be 16× the usual limit.",
			Body:        batchRequest{}, Status: http.StatusCreated, Response: jobList{},
			Errors: []int{400, 413, 415, 503},
		}},
		{http.MethodGet, "/v1/jobs", s.searchJobs, operation{
			Long: true,
			ID:   "searchJobs", Tag: "jobs", Summary: "Search the job history",
			Description: "Searches the history store, newest first. 503 when no history store is configured.",
			Query: []param{
				{"queue", "Only jobs of this queue.", queueSchema, false},
				{"type", "Only jobs of this type.", typeSchema, false},
				{"group", "Only jobs of this fairness group.", map[string]any{"type": "string", "pattern": "^[A-Za-z0-9_.:@-]{1,128}$"}, false},
				{"state", "Only jobs in this state.", enumSchema(job.State("")), false},
				tagParam,
				{"payload.{field}", "Only jobs whose payload's top-level field {field} has this value (a string as it is, a number as the payload writes it); several such parameters must all match. Only scalar fields, up to 32 a job and 128 bytes a value, are searchable.", textSchema, false},
				{"from", "created_at at or after this time.", timeSchema, false},
				{"to", "created_at before this time.", timeSchema, false},
				limitParam, cursorParam,
			},
			Status: http.StatusOK, Response: searchResult{}, Errors: []int{400, 503},
		}},
		{http.MethodGet, "/v1/jobs/:id", s.getJob, operation{
			ID: "getJob", Tag: "jobs", Summary: "Get a job",
			Description: "The job's current state, live from Redis, or from the history store once it has left Redis.",
			Status:      http.StatusOK, Response: job.Job{}, Errors: []int{400, 404, 503},
		}},
		{http.MethodGet, "/v1/jobs/:id/events", s.jobEvents, operation{
			Long: true,
			ID:   "jobEvents", Tag: "jobs", Summary: "A job's history, oldest first",
			Description: "From the history store; 503 when none is configured. Paged: limit (1-500, default 50) events a page, then next_cursor as cursor for the next page (empty on the last).",
			Query:       []param{limitParam, cursorParam},
			Status:      http.StatusOK, Response: eventList{}, Errors: []int{400, 404, 503},
		}},
		{http.MethodGet, "/v1/jobs/:id/graph", s.jobGraph, operation{
			Long: true,
			ID:   "jobGraph", Tag: "jobs", Summary: "A job's dependency graph",
			Description: "The jobs connected to this one by dependencies, both ways (a workflow), nearest first, up to limit (1-500, default 100) jobs; truncated says whether there were more. " +
				"An edge {from, to} says that job to waits for job from. A job's children are the jobs of its queue that still wait for it and, with a history store, every job recorded as depending on it, in any queue; without one, the children of a job whose edges are settled are not found. " +
				"A job named by an edge that neither Redis nor the history store knows is a node with missing true.",
			Query:  []param{{"limit", "How many jobs at most (1-500, default 100).", map[string]any{"type": "integer", "minimum": 1, "maximum": maxGraphNodes}, false}},
			Status: http.StatusOK, Response: jobGraph{}, Errors: []int{400, 404, 503},
		}},
		{http.MethodPost, "/v1/jobs/:id/cancel", s.cancelJob, operation{
			ID: "cancelJob", Audit: "job.cancel", Tag: "jobs", Summary: "Cancel a job",
			Description: "A queued, scheduled or waiting job ends cancelled; an active job's handler is told to stop and the job ends cancelled. A job in a final state answers 409. The body may be left out or be {}.",
			Body:        struct{}{}, BodyOptional: true, Status: http.StatusOK, Response: job.Job{},
			Errors: []int{400, 404, 409, 413, 415, 503},
		}},
		{http.MethodPost, "/v1/jobs/:id/retry", s.retryJob, operation{
			ID: "retryJob", Audit: "job.retry", Tag: "jobs", Summary: "Retry a dead or cancelled job",
			Description: "Queues the job again with attempt reset to 0 and a retried event; any other state answers 409. The body may be left out or be {}.",
			Body:        struct{}{}, BodyOptional: true, Status: http.StatusOK, Response: job.Job{},
			Errors: []int{400, 404, 409, 413, 415, 503},
		}},
		{http.MethodGet, "/v1/queues", s.listQueues, operation{
			ID: "listQueues", Tag: "queues", Summary: "Every queue's counts",
			Status: http.StatusOK, Response: queueList{}, Errors: []int{400, 503},
		}},
		{http.MethodGet, "/v1/queues/:q", s.getQueue, operation{
			ID: "getQueue", Tag: "queues", Summary: "One queue's counts",
			Description: "404 for a queue that never had a job and was never paused.",
			Status:      http.StatusOK, Response: queue.QueueStats{}, Errors: []int{400, 404, 503},
		}},
		{http.MethodDelete, "/v1/queues/:q", s.forgetQueue, operation{
			ID: "forgetQueue", Audit: "queue.forget", Tag: "queues", Summary: "Forget an empty queue",
			Description: "Takes the queue off the list of known queues, so that pollers and job lookups stop visiting it: one that holds no job in Redis (queued, scheduled, waiting, active, dead or finished), is not paused and has no limits. A later submit to it lists it again. 409 says what keeps it.",
			Status:      http.StatusNoContent, Errors: []int{400, 404, 409, 503},
		}},
		{http.MethodPost, "/v1/queues/:q/pause", s.pauseQueue, operation{
			ID: "pauseQueue", Audit: "queue.pause", Tag: "queues", Summary: "Pause a queue",
			Description: "Workers stop claiming from the queue; it keeps accepting and promoting jobs. Pausing an unknown queue creates it, so a queue can be paused before its first job. Answers the queue's counts.",
			Body:        struct{}{}, BodyOptional: true, Status: http.StatusOK, Response: queue.QueueStats{},
			Errors: []int{400, 413, 415, 503},
		}},
		{http.MethodPost, "/v1/queues/:q/resume", s.resumeQueue, operation{
			ID: "resumeQueue", Audit: "queue.resume", Tag: "queues", Summary: "Resume a paused queue",
			Body: struct{}{}, BodyOptional: true, Status: http.StatusOK, Response: queue.QueueStats{},
			Errors: []int{400, 404, 413, 415, 503},
		}},
		{http.MethodGet, "/v1/queues/:q/jobs", s.listLiveJobs, operation{
			ID: "listQueueJobs", Tag: "queues", Summary: "A queue's live jobs in one state, from Redis",
			Description: "Pages through the jobs Redis holds in one live state, without a history store: queued (in about the order they would be claimed: high, normal, low, a fairness group's jobs where its turn is, then the jobs limits and missing handlers hold back), " +
				"scheduled (by due time), waiting (by creation), active (by lease expiry), dead (newest first). Each page reads O(limit) entries whatever the backlog; with type, priority or tag, at most 2,000 entries are read per request, " +
				"so a page may hold fewer jobs than limit, even none, while next_cursor is not empty: follow it. The lists move while they are read: a job that changes state between two pages may be missed or shown twice, never shown in a state it has left. " +
				"The history search (GET /v1/jobs) serves the final states.",
			Query: []param{
				{"state", "The live state to list.", map[string]any{"type": "string", "enum": []string{"queued", "scheduled", "waiting", "active", "dead"}, "default": "queued"}, false},
				{"type", "Only jobs of this type.", typeSchema, false},
				{"priority", "Only jobs of this priority.", enumSchema(job.Priority("")), false},
				tagParam, limitParam, cursorParam,
			},
			Status: http.StatusOK, Response: searchResult{}, Errors: []int{400, 404, 503},
		}},
		{http.MethodPost, "/v1/queues/:q/jobs/bulk", s.bulkJobs, operation{
			Long: true,
			ID:   "bulkJobs", Audit: "jobs.bulk", Tag: "queues", Summary: "Retry, cancel, delete or move a selection of a queue's jobs",
			Description: "Applies action to the jobs named by ids (up to 10,000) or matched by filter, in chunks of 500, each one atomic script call, and answers the counts. " +
				"retry: dead (and, by ids, cancelled) jobs are queued again with attempt 0; cancel: queued, scheduled or waiting jobs (by ids: any job not final) end cancelled; delete: dead jobs are purged from Redis (their history stays); " +
				"move: dead jobs are submitted to to_queue as new queued jobs with the same type, payload, priority, max_attempts, timeout, backoff and group, idempotency_key \"moved-from:<original id>\", and the originals are purged. " +
				"A job that does not qualify is skipped (count < matched). Idempotent: a request cut short leaves whole chunks done and the rest untouched; sending it again finishes it. " +
				"While it runs, stream clients that follow the queue receive {\"kind\":\"bulk\"} progress messages (StreamBulkMessage), the last with done true.",
			Body: bulkRequest{}, Status: http.StatusOK, Response: bulkResult{},
			Errors: []int{400, 404, 413, 415, 503},
		}},
		{http.MethodGet, "/v1/queues/:q/dead", s.listDead, operation{
			ID: "listDead", Tag: "queues", Summary: "A queue's dead letters, newest first",
			Query:  []param{tagParam, limitParam, cursorParam},
			Status: http.StatusOK, Response: searchResult{}, Errors: []int{400, 404, 503},
		}},
		{http.MethodPost, "/v1/queues/:q/dead/retry", s.retryDead, operation{
			Long: true,
			ID:   "retryDead", Audit: "dead.retry", Tag: "queues", Summary: "Requeue dead letters",
			Description: "Requeues the listed dead jobs, or every dead job of the queue when the body or ids is left out. An empty ids list is refused.",
			Body:        deadSelection{}, BodyOptional: true, Status: http.StatusOK, Response: retriedCount{},
			Errors: []int{400, 404, 413, 415, 503},
		}},
		{http.MethodDelete, "/v1/queues/:q/dead", s.purgeDead, operation{
			Long: true,
			ID:   "purgeDead", Audit: "dead.purge", Tag: "queues", Summary: "Purge dead letters",
			Description: "Deletes the listed dead jobs, or every dead job of the queue when the body or ids is left out; their history stays in the history store. An empty ids list is refused.",
			Body:        deadSelection{}, BodyOptional: true, Status: http.StatusOK, Response: deletedCount{},
			Errors: []int{400, 404, 413, 415, 503},
		}},
		{http.MethodGet, "/v1/version", s.version, operation{
			ID: "version", Tag: "operations", Summary: "The API's release",
			Description: "The Sundial release this API process runs (semantic version, as in CHANGELOG.md and every binary's --version) and its Go version.",
			Status:      http.StatusOK, Response: versionInfo{}, Errors: []int{400},
		}},
		{http.MethodGet, "/v1/workers", s.listWorkers, operation{
			ID: "listWorkers", Tag: "workers", Summary: "Live workers",
			Description: "Workers seen within the last three heartbeats.",
			Status:      http.StatusOK, Response: workerList{}, Errors: []int{400, 503},
		}},
		{http.MethodGet, "/v1/workers/metrics-targets", s.metricsTargets, operation{
			ID: "metricsTargets", Tag: "workers", Summary: "Where the workers' metrics are (Prometheus service discovery)",
			Description: "The live workers that serve /metrics, as a Prometheus HTTP service-discovery list (http_sd_configs): one entry per worker, its metrics_url's host:port as the target, " +
				"worker_id and hostname as labels. Workers without a metrics_url (HTTP workers, SUNDIAL_METRICS_ADDR=off) are left out. See docs/operations.md.",
			Status: http.StatusOK, Response: []metricsTarget{}, Errors: []int{400, 503},
		}},
		{http.MethodGet, "/v1/storage", s.storage, operation{
			ID: "storage", Tag: "operations", Summary: "Storage format and its readers",
			Description: "The storage format the Redis holds (its marker), what this API reads and writes, and the processes registered as readers (APIs, workers, pollers), whose registrations are live, and the live workers that are not registered (a release from before the storage format). See docs/engine.md, \"Storage format\".",
			Status:      http.StatusOK, Response: storageView{}, Errors: []int{400, 503},
		}},
		{http.MethodGet, "/v1/throughput", s.throughput, operation{
			ID: "throughput", Tag: "queues", Summary: "Finished attempts per minute",
			Description: "Per queue, one entry per minute of the window, oldest first, the current (unfinished) minute last; minutes without work are zeros. Counted by the engine in Redis and kept 24 hours, so the dashboard's charts survive a reload. failed counts failed attempts (retried or dead, lease expiries included); dead counts jobs that went dead.",
			Query: []param{
				{"window", "How far back: 5m, 15m, 1h, 6h or 24h.", map[string]any{"type": "string", "enum": []string{"5m", "15m", "1h", "6h", "24h"}, "default": "1h"}, false},
				{"queue", "Only these queues; every known queue when left out.", queueSchema, true},
			},
			Status: http.StatusOK, Response: throughputResult{}, Errors: []int{400, 503},
		}},
		{http.MethodGet, "/v1/history/backlog", s.historyLag, operation{
			ID: "historyBacklog", Tag: "operations", Summary: "History writer backlog",
			Description: "Events in the queues' Redis streams that the history writers have not recorded yet, and the age of the oldest (the writer's lag), measured from Redis on request.",
			Status:      http.StatusOK, Response: historyBacklog{}, Errors: []int{400, 503},
		}},
		{http.MethodGet, "/v1/outbox", s.outboxStatus, operation{
			ID: "outbox", Tag: "operations", Summary: "Outbox relays",
			Description: "The transactional outboxes' relays (docs/outbox.md), as the leading relay of each last wrote in Redis (every 2 s while it leads): the lag (age of the oldest committed row not yet relayed, -1 when the outbox could not be read), the rows relayed, and whether a relay is running (wrote within the last 6 s). Empty when no outbox was ever relayed.",
			Status:      http.StatusOK, Response: outboxView{}, Errors: []int{400, 503},
		}},
		{http.MethodGet, streamPath, s.stream, operation{
			Long: true,
			ID:   "stream", Tag: "stream", Summary: "Live stream (websocket)",
			Description: "Upgrades to a websocket that sends JSON text messages: {\"kind\":\"event\",\"event\":StreamEvent} for each matching job event and {\"kind\":\"stats\",…} (StreamStats) every second to every client. " +
				"Filters are repeatable; values of one filter are alternatives, different filters must all match. A client that falls more than 256 messages behind is closed with 1013; " +
				"shutdown closes with 1001. Browsers authenticate with ?access_token=. Origins other than the API's host must be in SUNDIAL_ALLOWED_ORIGINS (403 otherwise).",
			Query: []param{
				{"queue", "Only events of these queues.", queueSchema, true},
				{"type", "Only events of these job types.", typeSchema, true},
				{"job", "Only events of these jobs.", idSchema, true},
				{"access_token", "The API key, for clients that cannot send Authorization.", textSchema, false},
			},
			Status: http.StatusSwitchingProtocols, Errors: []int{400, 403, 503},
		}},
		{http.MethodGet, "/v1/openapi.json", s.openAPI, operation{
			ID: "openAPI", Tag: "operations", Summary: "This document",
			Status: http.StatusOK, ContentType: "application/json",
		}},
		{http.MethodGet, "/healthz", s.healthz, operation{
			ID: "healthz", Tag: "operations", Summary: "Liveness", Public: true,
			Description: "200 while the process runs, whatever its dependencies do.",
			Status:      http.StatusOK, Response: healthBody{},
		}},
		{http.MethodGet, "/readyz", s.readyz, operation{
			ID: "readyz", Tag: "operations", Summary: "Readiness", Public: true,
			Description: "200 when Redis and the history store (when configured) answer; 503 with the same body shape naming what fails.",
			Status:      http.StatusOK, Response: readiness{},
			Also: map[int]string{http.StatusServiceUnavailable: "A dependency does not answer."},
		}},
		{http.MethodGet, "/metrics", s.metricsHandler(), operation{
			ID: "metrics", Tag: "operations", Summary: "Prometheus metrics", Public: true,
			Status: http.StatusOK, ContentType: "text/plain",
		}},
		{http.MethodGet, "/", s.index, operation{
			ID: "dashboard", Tag: "operations", Summary: "The dashboard (HTML)", Public: true,
			Description: "The single-page app of web/, embedded in the binary. Its files and client routes (/jobs, /schedules…) are served without a key; index.html is revalidated on every load, hashed assets are cached for a year, and text files are sent brotli- or gzip-compressed when the browser accepts it.",
			Status:      http.StatusOK, ContentType: "text/html",
		}},
	}, s.scheduleRoutes(), s.limitRoutes(), s.uniquenessRoutes(), s.workerRoutes(), s.durableRoutes(), s.logRoutes(), s.outcomeRoutes(), s.workflowRoutes(), s.batchRoutes(), s.auditRoutes(), s.signInRoutes())
}

var releaseMode sync.Once

// newEngine builds the Gin engine: release mode, no Gin logger or
// recovery (the server's own middleware does both), proxies trusted only
// when configured, and every route of the table.
func (s *Server) newEngine() (*gin.Engine, error) {
	releaseMode.Do(func() { gin.SetMode(gin.ReleaseMode) })
	e := gin.New()
	e.RedirectTrailingSlash = false
	e.RedirectFixedPath = false
	if err := e.SetTrustedProxies(s.cfg.TrustedProxies); err != nil {
		return nil, err
	}
	e.Use(traceRequests(otel.GetTracerProvider(), otel.GetTextMapPropagator()), s.observe(newRequestIDs()), s.recoverer, s.cors, s.deadline, s.guard)
	for _, r := range s.routes() {
		if r.Doc.Public || !strings.HasPrefix(r.Path, "/v1/") {
			e.Handle(r.Method, r.Path, r.Handler)
			continue
		}
		e.Handle(r.Method, r.Path, s.audited(r), s.requireScope(r.Doc.scope(r.Method)), s.fence(r), r.Handler)
	}
	for _, r := range s.routes() {
		switch {
		case r.Doc.Long:
			s.deadlines[r.Method+" "+r.Path] = 0
		case r.Doc.Many:
			s.deadlines[r.Method+" "+r.Path] = manyCalls * s.cfg.RequestTimeout
		}
	}
	e.NoRoute(s.notFound)
	return e, nil
}
