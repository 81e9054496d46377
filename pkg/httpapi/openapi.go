package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/sundialhq/sundial/internal/workflow"
	"github.com/sundialhq/sundial/pkg/job"
	"github.com/sundialhq/sundial/pkg/queue"
	"github.com/sundialhq/sundial/pkg/schedule"
)

// The OpenAPI document is generated from the route table and the Go types
// of the bodies, then committed as openapi.json (go test -run
// TestOpenAPIGolden -update) and embedded; the golden test keeps the two
// equal, so a change of the public surface shows in review.

// schemaNames names the component schemas of the Go types.
var schemaNames = map[reflect.Type]string{
	reflect.TypeFor[job.Job]():          "Job",
	reflect.TypeFor[job.Spec]():         "JobSpec",
	reflect.TypeFor[job.Backoff]():      "Backoff",
	reflect.TypeFor[job.Debounce]():     "Debounce",
	reflect.TypeFor[job.Sequence]():     "Sequence",
	reflect.TypeFor[job.LogCounts]():    "LogCounts",
	reflect.TypeFor[queue.LogEntry]():   "LogEntry",
	reflect.TypeFor[queue.LogLine]():    "LogLine",
	reflect.TypeFor[batchRequest]():     "BatchRequest",
	reflect.TypeFor[jobList]():          "JobList",
	reflect.TypeFor[searchResult]():     "JobPage",
	reflect.TypeFor[eventView]():        "JobEvent",
	reflect.TypeFor[eventList]():        "JobEventList",
	reflect.TypeFor[queue.QueueStats](): "QueueStats",
	reflect.TypeFor[queueList]():        "QueueList",
	reflect.TypeFor[deadSelection]():    "DeadSelection",
	reflect.TypeFor[retriedCount]():     "RetriedCount",
	reflect.TypeFor[deletedCount]():     "DeletedCount",
	reflect.TypeFor[bulkRequest]():      "BulkRequest",
	reflect.TypeFor[queue.BulkFilter](): "BulkFilter",
	reflect.TypeFor[bulkResult]():       "BulkResult",
	reflect.TypeFor[bulkMessage]():      "StreamBulkMessage",
	reflect.TypeFor[queue.WorkerInfo](): "Worker",
	reflect.TypeFor[workerList]():       "WorkerList",
	reflect.TypeFor[metricsTarget]():    "MetricsTarget",
	reflect.TypeFor[queue.ReaderInfo](): "Reader",
	reflect.TypeFor[storageView]():      "Storage",
	reflect.TypeFor[errorBody]():        "Error",
	reflect.TypeFor[errorDetail]():      "ErrorDetail",
	reflect.TypeFor[healthBody]():       "Health",
	reflect.TypeFor[readiness]():        "Readiness",
	reflect.TypeFor[readyCheck]():       "ReadyCheck",
	reflect.TypeFor[streamEvent]():      "StreamEvent",
	reflect.TypeFor[eventMessage]():     "StreamEventMessage",
	reflect.TypeFor[statsMessage]():     "StreamStats",
	reflect.TypeFor[struct{}]():         "Empty",

	// Recurring schedules (schedules.go).
	reflect.TypeFor[schedule.Schedule]():    "Schedule",
	reflect.TypeFor[schedule.JobTemplate](): "JobTemplate",
	reflect.TypeFor[scheduleList]():         "ScheduleList",

	// The HTTP worker protocol (workproto.go).
	reflect.TypeFor[claimRequest]():     "ClaimRequest",
	reflect.TypeFor[claimResult]():      "ClaimResult",
	reflect.TypeFor[claimedJob]():       "ClaimedJob",
	reflect.TypeFor[leaseInfo]():        "Lease",
	reflect.TypeFor[heartbeatRequest](): "HeartbeatRequest",
	reflect.TypeFor[heartbeatResult]():  "HeartbeatResult",
	reflect.TypeFor[completeRequest]():  "CompleteRequest",
	reflect.TypeFor[failRequest]():      "FailRequest",
	reflect.TypeFor[outcomeResult]():    "Outcome",
	reflect.TypeFor[job.Progress]():     "Progress",

	// Dashboard reads (insight.go).
	reflect.TypeFor[throughputResult]():       "Throughput",
	reflect.TypeFor[queueThroughput]():        "QueueThroughput",
	reflect.TypeFor[queue.MinuteCount]():      "MinuteCount",
	reflect.TypeFor[historyBacklog]():         "HistoryBacklog",
	reflect.TypeFor[outboxView]():             "OutboxStatus",
	reflect.TypeFor[outboxRelay]():            "OutboxRelay",
	reflect.TypeFor[queueHistoryState]():      "QueueHistoryBacklog",
	reflect.TypeFor[schedulePreviewRequest](): "SchedulePreviewRequest",
	reflect.TypeFor[schedulePreview]():        "SchedulePreview",

	// A queue's limits (limits.go).
	reflect.TypeFor[queue.LimitStatus](): "Limit",
	reflect.TypeFor[limitBody]():         "LimitSpec",
	reflect.TypeFor[limitList]():         "LimitList",
	reflect.TypeFor[queue.Rate]():        "Rate",

	// Workflows (workflows.go).
	reflect.TypeFor[workflowRequest](): "WorkflowRequest",
	reflect.TypeFor[workflowStep]():    "WorkflowStep",
	reflect.TypeFor[workflowResult]():  "Workflow",

	// A job's dependency graph (graph.go).
	reflect.TypeFor[jobGraph]():  "JobGraph",
	reflect.TypeFor[graphNode](): "GraphNode",
	reflect.TypeFor[graphEdge](): "GraphEdge",

	// Batches (batches.go).
	reflect.TypeFor[batchCreateRequest]():  "BatchCreateRequest",
	reflect.TypeFor[batchAddRequest]():     "BatchAddRequest",
	reflect.TypeFor[batchSubmitted]():      "BatchSubmitted",
	reflect.TypeFor[queue.BatchInfo]():     "Batch",
	reflect.TypeFor[queue.BatchCounts]():   "BatchCounts",
	reflect.TypeFor[queue.BatchCallback](): "BatchCallback",
	reflect.TypeFor[queue.BatchResult]():   "BatchResult",
	reflect.TypeFor[batchResults]():        "BatchResultPage",
	reflect.TypeFor[cancelledCount]():      "CancelledCount",
}

// enums lists the values of the API's enumerated string types.
var enums = map[reflect.Type][]string{
	reflect.TypeFor[job.Priority](): {"high", "normal", "low"},
	reflect.TypeFor[job.State]():    {"waiting", "scheduled", "queued", "active", "succeeded", "dead", "cancelled"},
	reflect.TypeFor[job.EventType](): {"submitted", "scheduled", "queued", "started", "succeeded", "failed",
		"dead", "cancelled", "retried", "lease_expired", "waiting", "snoozed", "parked", "step", "signal"},

	reflect.TypeFor[schedule.MisfirePolicy](): {"skip", "run_once", "run_all"},
}

// requestRequired overrides the required properties of request bodies,
// whose omitted fields take defaults.
var requestRequired = map[string][]string{
	"JobSpec":       {"type"},
	"BatchRequest":  {"jobs"},
	"DeadSelection": {},
	"BulkRequest":   {"action"},
	"BulkFilter":    {},

	"Schedule":               {"job"},
	"SchedulePreviewRequest": {},

	"LimitSpec": {},

	"WorkflowRequest": {"steps"},

	"BatchCreateRequest": {},
	"BatchAddRequest":    {},
	"WorkflowStep":       {"name", "job"},
}

// objectRules add the rules that tie properties of a schema together, by
// schema name, so that the document states what the API refuses with 400.
var objectRules = map[string]map[string]any{
	"JobSpec":   {"not": map[string]any{"required": []string{"run_at", "delay_seconds"}}},
	"Schedule":  {"oneOf": []any{map[string]any{"required": []string{"cron"}}, map[string]any{"required": []string{"every_seconds"}}}},
	"LimitSpec": {"anyOf": []any{map[string]any{"required": []string{"concurrency"}}, map[string]any{"required": []string{"rate"}}}},
	"BulkRequest": {"oneOf": []any{map[string]any{"required": []string{"ids"}}, map[string]any{"required": []string{"filter"}}},
		"if": map[string]any{"properties": map[string]any{"action": map[string]any{"const": "move"}}}, "then": map[string]any{"required": []string{"to_queue"}}},
}

// fieldHints add constraints and descriptions to properties, by
// "Schema.property".
var fieldHints = withHints(limitHints(), map[string]map[string]any{
	"JobSpec.queue":                  {"pattern": "^[a-z0-9_-]{1,64}$", "default": job.DefaultQueue},
	"JobSpec.type":                   {"pattern": "^[A-Za-z0-9_.:-]{1,128}$", "description": "The handler that runs the job."},
	"JobSpec.payload":                {"description": "Any JSON value, handed to the handler."},
	"JobSpec.priority":               {"default": "normal", "description": "Strict within a queue: no low runs while high or normal waits."},
	"JobSpec.max_attempts":           {"minimum": 1, "maximum": job.MaxMaxAttempts, "default": job.DefaultMaxAttempts},
	"JobSpec.timeout_seconds":        {"minimum": 1, "maximum": job.MaxTimeoutSeconds, "default": job.DefaultTimeoutSeconds, "description": "The lease: a worker that dies loses it and the job is retried."},
	"JobSpec.run_at":                 {"description": "When the job becomes due; at most 366 days ahead. Not with delay_seconds."},
	"JobSpec.delay_seconds":          {"minimum": 0, "maximum": int(job.MaxDelay.Seconds()), "description": "Due this many seconds from now. Not with run_at."},
	"JobSpec.depends_on":             {"maxItems": job.MaxDependencies, "description": "Jobs of the same queue that must succeed first; in a batch \"#n\" names the batch's job n."},
	"JobSpec.idempotency_key":        {"maxLength": job.MaxIdempotencyKeyLen, "description": "Same key in the same queue within 24 h: the first job is answered, nothing new is created."},
	"Backoff.base_seconds":           {"minimum": 0, "description": "Delay before retry n is random in [0, min(max, base·2^(n-1))]; 0 retries at once."},
	"Backoff.max_seconds":            {"minimum": 0},
	"BatchRequest.jobs":              {"minItems": 1, "maxItems": MaxBatchJobs},
	"WorkflowRequest.id":             {"pattern": "^[A-Za-z0-9_.:@-]{1,128}$", "description": "Names the workflow; a step without an idempotency_key gets \"wf:<id>:<name>\". A new ULID when left out."},
	"WorkflowRequest.steps":          {"minItems": 1, "maxItems": workflow.MaxSteps},
	"BatchCreateRequest.id":          {"pattern": "^[A-Za-z0-9_.:@-]{1,128}$", "description": "Names the batch; a new ULID when left out."},
	"BatchCreateRequest.jobs":        {"maxItems": maxBatchMembers, "description": "The members: each as POST /v1/jobs takes it, without depends_on and idempotency_key. At least one unless open."},
	"BatchCreateRequest.open":        {"description": "Leave the batch unsealed: add members with POST /v1/batches/{id}/jobs and seal it there; the callbacks wait for the seal."},
	"BatchCreateRequest.on_success":  {"description": "Submitted once every member succeeded (and the batch is sealed). Its payload, a JSON object or none, gets the member \"batch\"."},
	"BatchCreateRequest.on_complete": {"description": "Submitted once every member ended, whatever the outcome (and the batch is sealed). Its payload, a JSON object or none, gets the member \"batch\"."},
	"BatchCallback.state":            {"enum": []string{"pending", "due", "fired"}},
	"Job.batch":                      {"description": "The batch the job belongs to, as a member or as one of its callbacks."},
	"BatchAddRequest.jobs":           {"maxItems": maxBatchMembers},
	"BatchAddRequest.seal":           {"description": "Seal the batch after these jobs: no more can be added, and the callbacks fire once every member ended."},
	"WorkflowStep.name":              {"pattern": "^[A-Za-z0-9_.-]{1,64}$", "description": "Unique within the workflow."},
	"WorkflowStep.after":             {"maxItems": workflow.MaxAfter, "description": "Names of the steps that must succeed first."},
	"DeadSelection.ids":              {"minItems": 1, "description": "Leave out to act on every dead job of the queue."},
	"JobPage.next_cursor":            {"description": "Pass as cursor for the next page; empty on the last page."},
	"BulkRequest.action":             {"enum": []string{"retry", "cancel", "delete", "move"}},
	"BulkRequest.ids":                {"minItems": 1, "maxItems": queue.BulkMaxIDs, "description": "The jobs to act on; not with filter."},
	"BulkRequest.filter":             {"description": "Select the queue's jobs by what they are; not with ids. {} selects every dead job."},
	"BulkRequest.to_queue":           {"pattern": "^[a-z0-9_-]{1,64}$", "description": "move only: the queue the jobs go to."},
	"BulkFilter.state":               {"enum": []string{"dead", "queued", "scheduled", "waiting"}, "default": "dead", "description": "dead for retry, delete and move; queued, scheduled or waiting for cancel."},
	"BulkFilter.type":                {"pattern": "^[A-Za-z0-9_.:-]{1,128}$"},
	"BulkFilter.tag":                 {"pattern": "^[A-Za-z0-9_.:=/-]{1,64}$"},
	"LogEntry.level":                 {"enum": queue.LogLevels},
	"LogLine.level":                  {"enum": queue.LogLevels},
	"LogEntry.fields":                {"maxProperties": queue.MaxLogFields},
	"LogEntry.message":               {"description": "Cut at 8 KiB."},
	"JobSpec.tags":                   {"maxItems": job.MaxTags, "items": map[string]any{"type": "string", "pattern": "^[A-Za-z0-9_.:=/-]{1,64}$"}},
	"Debounce.mode":                  {"enum": []string{job.DebounceReplace, job.DebounceExtend}, "default": job.DebounceReplace},
	"Debounce.window_seconds":        {"exclusiveMinimum": 0, "maximum": job.MaxDebounceSeconds},
	"Debounce.max_wait_seconds":      {"description": "Default: the window for replace, 10 windows for extend; at least the window, at most 86400."},
	"Sequence.on_failure":            {"enum": []string{job.SequenceContinue, job.SequenceCancel}, "default": job.SequenceContinue},
	"BulkFilter.error_contains":      {"description": "Only jobs whose last_error contains this text (case-sensitive)."},
	"BulkFilter.since":               {"description": "dead: only jobs that died at or after it; other states: created at or after it."},
	"BulkResult.id":                  {"description": "The request's X-Request-Id, which its stream progress messages carry."},
	"BulkResult.matched":             {"description": "Jobs selected: the distinct ids given, or the jobs the filter matched."},
	"BulkResult.count":               {"description": "Jobs the action changed; a selected job that no longer qualifies is skipped."},
	"BulkResult.scanned":             {"description": "Entries a filter read."},
	"BulkResult.done":                {"description": "false in the stream's progress messages while the action runs."},
	"StreamBulkMessage.kind":         {"const": "bulk"},
	"ErrorDetail.code": {"enum": []string{codeInvalidArgument, codeUnauthenticated, codePermissionDenied, codeNotFound, codeConflict,
		codePayloadTooLarge, codeUnsupportedMediaType, codeRateLimited, codeInternal, codeUnavailable}},
	"ErrorDetail.field":            {"description": "The input field at fault, e.g. priority or jobs[3].run_at."},
	"Readiness.status":             {"enum": []string{"ok", "unavailable"}},
	"ReadyCheck.status":            {"enum": []string{"ok", "down", "not_configured"}},
	"ReadyCheck.detail":            {"enum": []string{"timeout", "connection refused", "unreachable", "error"}},
	"StreamEventMessage.kind":      {"const": "event"},
	"StreamStats.kind":             {"const": "stats"},
	"StreamStats.workers":          {"description": "Live workers."},
	"Storage.format":               {"description": "The storage format the Redis holds (its marker): \"1\" until the processes move it to a newer one (this release writes \"3\") once no live reader lacks it."},
	"Storage.reads":                {"description": "The formats this API's release reads."},
	"Storage.writes":               {"description": "The format this API writes now: 1 until the marker moved to 2 and its writable_at passed, then 2."},
	"Storage.newest":               {"description": "The newest format this API's release writes, once every live process reads it."},
	"Storage.writable_at":          {"description": "When the marker's format became, or becomes, writable: 30 s after the marker moved, or at the move where no older release was ever seen. Absent while the marker never moved."},
	"Storage.held_back_by":         {"description": "Live readers that lack the newest format: while there are any (or unregistered workers), the marker does not move to it."},
	"Storage.unregistered_workers": {"description": "Live workers (GET /v1/workers) with no reader registration of the same host and pid: a release from before the storage format. HTTP workers are left out."},
	"Worker.metrics_url":           {"format": "uri", "description": "Where the worker serves its /metrics (SUNDIAL_METRICS_ADDR); absent when it serves none."},
	"MetricsTarget.targets":        {"minItems": 1, "maxItems": 1, "description": "The worker's metrics host:port."},
	"MetricsTarget.labels":         {"description": "worker_id and hostname; __metrics_path__ when the path is not /metrics."},
	"Reader.role":                  {"description": "api, worker or poller."},
	"Reader.writes":                {"description": "The storage format the process writes, as of its last renewal."},
	"Reader.expires_at":            {"description": "When the registration lapses unless renewed (every 5 s; it lasts 30 s)."},

	"Schedule.id":            {"pattern": "^[A-Za-z0-9_.:-]{1,128}$", "description": "Chosen by the client; may be left out of a PUT body (the path names it)."},
	"Schedule.cron":          {"description": "5 fields (minute hour day-of-month month day-of-week), 6 with leading seconds, or @yearly, @monthly, @weekly, @daily, @hourly… Not with every_seconds."},
	"Schedule.every_seconds": {"minimum": 1, "maximum": schedule.MaxEverySeconds, "description": "A fixed interval, counted from the schedule's creation. Not with cron."},
	"Schedule.timezone":      {"default": "UTC", "description": "IANA zone cron is read in; DST: a skipped time fires once, a repeated hour once."},
	"Schedule.enabled":       {"default": true},
	"Schedule.misfire":       {"default": "run_once", "description": "Fire times missed while no scheduler ran: skip none, run the newest once, or run all (the newest 100)."},
	"Schedule.next_run_at":   {"type": []string{"string", "null"}, "description": "Read-only; null while disabled."},
	"Schedule.last_run_at":   {"type": []string{"string", "null"}, "description": "Read-only: the fire time of the last submitted job."},
	"Schedule.upcoming":      {"maxItems": schedule.UpcomingCount, "description": "Read-only: the next five fire times, from next_run_at; empty while disabled."},
})

// limitHints are the hints of a limit as written (LimitSpec) and as read
// (Limit): the same fields.
func limitHints() map[string]map[string]any {
	limit := map[string]map[string]any{
		"name":        {"pattern": "^[A-Za-z0-9_.-]{1,64}$"},
		"types":       {"maxItems": queue.MaxLimitTypes, "items": map[string]any{"type": "string", "pattern": "^[A-Za-z0-9_.:-]{1,128}$"}, "description": "The job types it covers; every type of the queue when left out."},
		"key":         {"pattern": "^[A-Za-z0-9_-]{1,64}$", "description": "A top-level payload field: each of its values gets a limit of its own."},
		"concurrency": {"minimum": 0, "maximum": queue.MaxLimitConcurrency, "description": "Jobs running at once; 0 or left out: no concurrency limit. At least one of concurrency and rate."},
		"rate":        {"description": "Starts per period. At least one of concurrency and rate."},
		"active":      {"minimum": 0, "description": "The running jobs that hold a concurrency slot of it."},
		"throttled":   {"minimum": 0, "description": "The queued jobs it holds back."},
	}
	out := map[string]map[string]any{
		"Rate.limit":          {"minimum": 1, "maximum": queue.MaxRateLimit},
		"Rate.period_seconds": {"minimum": 1, "maximum": queue.MaxRatePeriod},
	}
	for prop, h := range limit {
		out["Limit."+prop] = h
		out["LimitSpec."+prop] = h
	}
	out["LimitSpec.name"] = mergeHints(limit["name"], map[string]any{"description": "May be left out; when present it must equal the path's."})
	readOnly := map[string]any{"description": "Read-only: ignored, so that a limit read can be written back."}
	out["LimitSpec.active"] = mergeHints(limit["active"], readOnly)
	out["LimitSpec.throttled"] = mergeHints(limit["throttled"], readOnly)
	return out
}

// withHints returns hints with more added.
func withHints(hints, more map[string]map[string]any) map[string]map[string]any {
	for k, v := range more {
		hints[k] = v
	}
	return hints
}

// errorResponses are the shared error responses, by status.
var errorResponses = map[int]struct{ name, description string }{
	http.StatusBadRequest:            {"InvalidArgument", "invalid_argument: the request is malformed; field names the input at fault."},
	http.StatusUnauthorized:          {"Unauthenticated", "unauthenticated: missing or wrong API key."},
	http.StatusForbidden:             {"PermissionDenied", "permission_denied: the websocket's Origin is not allowed."},
	http.StatusNotFound:              {"NotFound", "not_found."},
	http.StatusConflict:              {"Conflict", "conflict: the job's state does not allow this."},
	http.StatusRequestEntityTooLarge: {"PayloadTooLarge", "payload_too_large: the body exceeds SUNDIAL_MAX_BODY_BYTES (16× for a batch)."},
	http.StatusUnsupportedMediaType:  {"UnsupportedMediaType", "unsupported_media_type: the body is not application/json."},
	http.StatusTooManyRequests:       {"RateLimited", "rate_limited: the key's (or IP's) budget is spent; Retry-After says when to retry."},
	http.StatusInternalServerError:   {"Internal", "internal: an unexpected error; the log has details under the request id."},
	http.StatusServiceUnavailable:    {"Unavailable", "unavailable: Redis (or the history store) cannot be reached."},
}

// schemaGen turns Go types into JSON Schema, collecting named types as
// components.
type schemaGen struct {
	components map[string]any
}

func (g *schemaGen) ref(t reflect.Type) map[string]any {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	name, named := schemaNames[t]
	if !named {
		return g.schema(t, "")
	}
	if _, done := g.components[name]; !done {
		g.components[name] = map[string]any{} // placeholder against recursion
		g.components[name] = g.schema(t, name)
	}
	return map[string]any{"$ref": "#/components/schemas/" + name}
}

func (g *schemaGen) schema(t reflect.Type, name string) map[string]any {
	if vals, ok := enums[t]; ok {
		return map[string]any{"type": "string", "enum": vals}
	}
	switch t {
	case reflect.TypeFor[time.Time](), reflect.TypeFor[msTime]():
		return map[string]any{"type": "string", "format": "date-time"}
	case reflect.TypeFor[json.RawMessage]():
		return map[string]any{}
	}
	switch t.Kind() {
	case reflect.Pointer:
		return g.ref(t.Elem())
	case reflect.String:
		return map[string]any{"type": "string"}
	case reflect.Bool:
		return map[string]any{"type": "boolean"}
	case reflect.Int, reflect.Int32:
		return map[string]any{"type": "integer"}
	case reflect.Int64:
		return map[string]any{"type": "integer", "format": "int64"}
	case reflect.Float64:
		return map[string]any{"type": "number"}
	case reflect.Slice:
		return map[string]any{"type": "array", "items": g.ref(t.Elem())}
	case reflect.Map:
		return map[string]any{"type": "object", "additionalProperties": g.ref(t.Elem())}
	case reflect.Struct:
		return g.object(t, name)
	}
	panic("openapi: no schema for " + t.String())
}

func (g *schemaGen) object(t reflect.Type, name string) map[string]any {
	props := map[string]any{}
	required := []string{}
	g.fields(t, name, props, &required)
	if r, ok := requestRequired[name]; ok {
		required = r
	}
	out := map[string]any{"type": "object", "properties": props, "additionalProperties": false}
	if len(required) > 0 {
		out["required"] = required
	}
	for k, v := range objectRules[name] {
		out[k] = v
	}
	return out
}

// fields adds the properties of struct t to props as encoding/json writes
// them: the fields of an embedded struct without a JSON name are the
// outer object's own (queue.LimitStatus is a queue.Limit's fields plus
// two), and an outer field wins over an embedded one of the same name.
func (g *schemaGen) fields(t reflect.Type, name string, props map[string]any, required *[]string) {
	var embedded []reflect.Type
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		prop, opts, _ := strings.Cut(tag, ",")
		ft := f.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if f.Anonymous && prop == "" && ft.Kind() == reflect.Struct {
			embedded = append(embedded, ft)
			continue
		}
		if !f.IsExported() || tag == "-" {
			continue
		}
		if prop == "" {
			prop = f.Name
		}
		s := g.ref(f.Type)
		if hints, ok := fieldHints[name+"."+prop]; ok {
			s = mergeHints(s, hints)
		}
		props[prop] = s
		if !strings.Contains(opts, "omitempty") {
			*required = append(*required, prop)
		}
	}
	for _, et := range embedded {
		inner, innerRequired := map[string]any{}, []string{}
		g.fields(et, name, inner, &innerRequired)
		fresh := map[string]bool{}
		for prop, s := range inner {
			if _, ok := props[prop]; !ok {
				props[prop] = s
				fresh[prop] = true
			}
		}
		// In declaration order, not the map's: the document is a golden file.
		for _, prop := range innerRequired {
			if fresh[prop] {
				*required = append(*required, prop)
			}
		}
	}
}

// mergeHints adds hints to a property schema; a $ref is wrapped in allOf
// so that siblings stay valid everywhere.
func mergeHints(s, hints map[string]any) map[string]any {
	out := map[string]any{}
	if ref, ok := s["$ref"]; ok {
		out["allOf"] = []any{map[string]any{"$ref": ref}}
	} else {
		for k, v := range s {
			out[k] = v
		}
	}
	for k, v := range hints {
		out[k] = v
	}
	return out
}

// enumSchema returns the schema of an enumerated string type.
func enumSchema(v any) map[string]any {
	return map[string]any{"type": "string", "enum": enums[reflect.TypeOf(v)]}
}

// openAPIPath turns /v1/jobs/:id into /v1/jobs/{id}.
func openAPIPath(p string) string {
	parts := strings.Split(p, "/")
	for i, s := range parts {
		if strings.HasPrefix(s, ":") || strings.HasPrefix(s, "*") {
			parts[i] = "{" + s[1:] + "}"
		}
	}
	return strings.Join(parts, "/")
}

var pathParams = map[string]map[string]any{
	"id": {"description": "A job id.", "schema": idSchema},
	"q":  {"description": "A queue name.", "schema": queueSchema},

	"schedule_id": {"description": "A schedule id.", "schema": scheduleIDSchema},
	"name":        {"description": "A limit's name.", "schema": map[string]any{"type": "string", "pattern": "^[A-Za-z0-9_.-]{1,64}$"}},
	"signal":      {"description": "A signal's name (docs/durable.md).", "schema": map[string]any{"type": "string", "minLength": 1, "maxLength": 200}},
}

// buildOpenAPI generates the OpenAPI 3.1 document of routes.
func buildOpenAPI(routes []route) ([]byte, error) {
	g := &schemaGen{components: map[string]any{}}
	g.ref(reflect.TypeFor[errorBody]())
	for _, t := range []any{streamEvent{}, eventMessage{}, statsMessage{}, bulkMessage{}} {
		g.ref(reflect.TypeOf(t))
	}
	rateHeaders := map[string]any{
		"X-RateLimit-Limit":     map[string]any{"$ref": "#/components/headers/X-RateLimit-Limit"},
		"X-RateLimit-Remaining": map[string]any{"$ref": "#/components/headers/X-RateLimit-Remaining"},
		"X-RateLimit-Reset":     map[string]any{"$ref": "#/components/headers/X-RateLimit-Reset"},
		"X-Request-Id":          map[string]any{"$ref": "#/components/headers/X-Request-Id"},
	}
	paths := map[string]any{}
	for _, r := range routes {
		v1 := strings.HasPrefix(r.Path, "/v1/")
		d := r.Doc
		op := map[string]any{"operationId": d.ID, "tags": []string{d.Tag}, "summary": d.Summary}
		if d.Description != "" {
			op["description"] = d.Description
		}
		if v1 && !d.Public {
			// The scope an API key needs (SUNDIAL_API_KEYS "<key>:<scope>+…").
			op["x-sundial-scope"] = d.scope(r.Method)
		}
		if d.Public || !v1 {
			op["security"] = []any{}
		} else if r.Path == streamPath {
			op["security"] = []any{map[string]any{"bearer": []any{}}, map[string]any{"accessToken": []any{}}}
		}
		var params []any
		for _, seg := range strings.Split(r.Path, "/") {
			if name, ok := strings.CutPrefix(seg, ":"); ok {
				if pathParams[name]["schema"] == nil {
					// OpenAPI requires a schema (or content) for every parameter.
					return nil, fmt.Errorf("openapi: path parameter %q of %s has no schema in pathParams", name, r.Path)
				}
				p := map[string]any{"name": name, "in": "path", "required": true}
				for k, v := range pathParams[name] {
					p[k] = v
				}
				params = append(params, p)
			}
		}
		for _, q := range d.Query {
			schema := q.Schema
			if q.Repeated {
				schema = map[string]any{"type": "array", "items": q.Schema}
			}
			p := map[string]any{"name": q.Name, "in": "query", "description": q.Description, "schema": schema}
			if q.Repeated {
				p["style"], p["explode"] = "form", true
			}
			params = append(params, p)
		}
		if len(params) > 0 {
			op["parameters"] = params
		}
		if d.Body != nil {
			op["requestBody"] = map[string]any{
				"required": !d.BodyOptional,
				"content":  map[string]any{"application/json": map[string]any{"schema": g.ref(reflect.TypeOf(d.Body))}},
			}
		}
		responses := map[string]any{}
		success := func(status int, description string) map[string]any {
			resp := map[string]any{"description": description}
			switch {
			case d.Response != nil:
				resp["content"] = map[string]any{"application/json": map[string]any{"schema": g.ref(reflect.TypeOf(d.Response))}}
			case d.ContentType != "":
				resp["content"] = map[string]any{d.ContentType: map[string]any{}}
			}
			if v1 {
				resp["headers"] = rateHeaders
			}
			return resp
		}
		responses[strconv.Itoa(d.Status)] = success(d.Status, http.StatusText(d.Status))
		for status, desc := range d.Also {
			responses[strconv.Itoa(status)] = success(status, desc)
		}
		errs := append([]int{}, d.Errors...)
		if v1 {
			errs = append(errs, http.StatusUnauthorized, http.StatusTooManyRequests)
		}
		if d.ContentType == "" || v1 {
			errs = append(errs, http.StatusInternalServerError)
		}
		for _, status := range errs {
			responses[strconv.Itoa(status)] = map[string]any{"$ref": "#/components/responses/" + errorResponses[status].name}
		}
		op["responses"] = responses
		p := openAPIPath(r.Path)
		item, _ := paths[p].(map[string]any)
		if item == nil {
			item = map[string]any{}
			paths[p] = item
		}
		item[strings.ToLower(r.Method)] = op
	}
	responses := map[string]any{}
	for _, e := range errorResponses {
		responses[e.name] = map[string]any{
			"description": e.description,
			"headers":     rateHeaders,
			"content":     map[string]any{"application/json": map[string]any{"schema": map[string]any{"$ref": "#/components/schemas/Error"}}},
		}
	}
	responses["RateLimited"].(map[string]any)["headers"] = mergeHints(rateHeaders, map[string]any{
		"Retry-After": map[string]any{"description": "Seconds until the budget resets.", "schema": map[string]any{"type": "integer"}},
	})
	doc := map[string]any{
		"openapi": "3.1.0",
		"info": map[string]any{
			"title":   "Sundial API",
			"version": "1",
			"description": "The HTTP API of Sundial, a distributed job scheduler. JSON in and out; every error has the shape " +
				"{\"error\": {\"code\", \"message\", \"field\"}}. See docs/api.md for the rules behind each route.",
		},
		"tags": []any{
			map[string]any{"name": "jobs", "description": "Submit, inspect, cancel and retry jobs."},
			map[string]any{"name": "queues", "description": "Queue counts, pause and resume, dead letters."},
			map[string]any{"name": "schedules", "description": "Recurring schedules: cron or interval, fired exactly once per fire time."},
			map[string]any{"name": "batches", "description": "Batches of jobs in any queues, with callbacks when they end."},
			map[string]any{"name": "workers", "description": "The worker registry."},
			map[string]any{"name": "stream", "description": "Live events and stats over a websocket."},
			map[string]any{"name": "operations", "description": "Health, readiness, metrics, this document, the live view."},
		},
		"security": []any{map[string]any{"bearer": []any{}}},
		"paths":    paths,
		"components": map[string]any{
			"schemas":   g.components,
			"responses": responses,
			"securitySchemes": map[string]any{
				"bearer":      map[string]any{"type": "http", "scheme": "bearer", "description": "An API key of SUNDIAL_API_KEYS. Not needed when none is configured (open API)."},
				"accessToken": map[string]any{"type": "apiKey", "in": "query", "name": "access_token", "description": "The API key, for the websocket only."},
			},
			"headers": map[string]any{
				"X-RateLimit-Limit":     map[string]any{"description": "Requests allowed per window (present when rate limiting is on).", "schema": map[string]any{"type": "integer"}},
				"X-RateLimit-Remaining": map[string]any{"description": "Requests left in the current window.", "schema": map[string]any{"type": "integer"}},
				"X-RateLimit-Reset":     map[string]any{"description": "Unix time (seconds) when the window resets.", "schema": map[string]any{"type": "integer"}},
				"X-Request-Id":          map[string]any{"description": "The request's id: the client's own when sane, else generated. Logged with every line about the request.", "schema": map[string]any{"type": "string"}},
			},
		},
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
