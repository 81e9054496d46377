package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/url"
	"strings"
)

// runJobs handles "sundial jobs SUBCOMMAND".
func runJobs(ctx context.Context, a *app, args []string) error {
	if len(args) == 0 {
		return usagef("jobs: give a subcommand: submit, get, list, search, wait, logs, cancel, retry, signal or bulk")
	}
	sub, args := args[0], args[1:]
	switch sub {
	case "submit":
		return jobsSubmit(ctx, a, args)
	case "get":
		return jobOne(ctx, a, args, "get", "GET", "")
	case "cancel":
		return jobOne(ctx, a, args, "cancel", "POST", "/cancel")
	case "retry":
		return jobOne(ctx, a, args, "retry", "POST", "/retry")
	case "list":
		return jobsList(ctx, a, args)
	case "wait":
		return jobsWait(ctx, a, args)
	case "signal":
		return jobsSignal(ctx, a, args)
	case "bulk":
		return jobsBulk(ctx, a, args)
	case "logs":
		return jobsLogs(ctx, a, args)
	case "search":
		return jobsSearch(ctx, a, args)
	}
	return usagef("jobs: unknown subcommand %q", sub)
}

// jobsSubmit handles "jobs submit [-f FILE] [flags]".
func jobsSubmit(ctx context.Context, a *app, args []string) error {
	fs := a.flags("jobs submit")
	file := fs.String("f", "", "read the job as JSON from `file` (- for stdin)")
	fs.String("type", "", "job `type` (required)")
	fs.String("queue", "", "`queue` (default: default)")
	fs.String("payload", "", "payload, `JSON`")
	fs.String("priority", "", "`priority`: high, normal or low")
	fs.Int("max-attempts", 0, "attempts before the job is dead, 1-100")
	fs.Int("job-timeout", 0, "the job's timeout in `seconds`")
	fs.Float64("delay", 0, "run after this many `seconds`")
	fs.String("run-at", "", "run at this RFC 3339 `time`")
	fs.String("idempotency-key", "", "the same `key` in the same queue within 24 h submits nothing new")
	fs.String("depends-on", "", "comma-separated job `ids` that must succeed first")
	fs.String("group", "", "fairness `group` (a tenant): groups take turns within a priority")
	fs.String("start-by", "", "expire the job (dead, \"expired: ...\") unless it starts by this RFC 3339 `time`")
	fs.Float64("expires-in", 0, "expire the job unless it starts within this many `seconds`")
	fs.String("deadline", "", "no attempt starts after this RFC 3339 `time`; a running one is stopped at it; no retry past it")
	fs.Float64("deadline-in", 0, "the deadline this many `seconds` from now")
	fs.String("debounce", "", "debounce `key`: submits of the key within the window update one pending job")
	fs.Float64("debounce-window", 0, "with --debounce: the window in `seconds` (required)")
	fs.String("debounce-mode", "", "with --debounce: `replace` (the payload; default) or extend (the run time)")
	fs.Float64("debounce-max-wait", 0, "with --debounce: the longest wait after the first submit, `seconds`")
	fs.String("sequence", "", "sequence `key`: the queue's jobs of the key run one at a time, in submit order")
	fs.String("sequence-on-failure", "", "with --sequence: `continue` (default) or cancel the jobs behind one that ends dead or cancelled")
	var tags listFlag
	fs.Var(&tags, "tag", "a `tag` of the job (repeatable, or comma-separated; at most 10)")
	pos, err := parse(fs, args, false)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("jobs submit takes flags only, not %q", pos[0])
	}
	doc := map[string]any{}
	if *file != "" {
		if doc, err = readDoc(a, *file); err != nil {
			return err
		}
	}
	var bad error
	debounce, sequence := map[string]any{}, map[string]any{}
	fs.Visit(func(f *flag.Flag) {
		v := f.Value.String()
		switch f.Name {
		case "start-by", "deadline":
			doc[strings.ReplaceAll(f.Name, "-", "_")] = v
		case "expires-in":
			doc["expires_in_seconds"] = json.Number(v)
		case "deadline-in":
			doc["deadline_in_seconds"] = json.Number(v)
		case "debounce":
			debounce["key"] = v
		case "debounce-window":
			debounce["window_seconds"] = json.Number(v)
		case "debounce-mode":
			debounce["mode"] = v
		case "debounce-max-wait":
			debounce["max_wait_seconds"] = json.Number(v)
		case "sequence":
			sequence["key"] = v
		case "sequence-on-failure":
			sequence["on_failure"] = v
		case "tag":
			doc["tags"] = []string(tags)
		case "type", "queue", "priority", "idempotency-key", "group":
			doc[strings.ReplaceAll(f.Name, "-", "_")] = v
		case "run-at":
			doc["run_at"] = v
		case "max-attempts":
			doc["max_attempts"] = json.Number(v)
		case "job-timeout":
			doc["timeout_seconds"] = json.Number(v)
		case "delay":
			doc["delay_seconds"] = json.Number(v)
		case "depends-on":
			doc["depends_on"] = strings.Split(v, ",")
		case "payload":
			if !json.Valid([]byte(v)) {
				bad = usagef("--payload is not valid JSON: %s", v)
			}
			doc["payload"] = json.RawMessage(v)
		}
	})
	if bad != nil {
		return bad
	}
	if len(debounce) > 0 {
		if debounce["key"] == nil {
			return usagef("--debounce-window, --debounce-mode and --debounce-max-wait go with --debounce KEY")
		}
		doc["debounce"] = debounce
	}
	if len(sequence) > 0 {
		if sequence["key"] == nil {
			return usagef("--sequence-on-failure goes with --sequence KEY")
		}
		doc["sequence"] = sequence
	}
	var j jobView
	status, raw, err := a.client().do(ctx, "POST", "/v1/jobs", doc, &j)
	if err != nil || a.opts.json {
		return jsonOr(a, raw, err)
	}
	switch {
	case j.Debounced:
		fmt.Fprintf(a.env.stdout, "debounced into pending job %s\n", j.ID)
	case status == 200:
		fmt.Fprintf(a.env.stdout, "an earlier job has the same idempotency key; nothing new submitted\n")
	default:
		fmt.Fprintf(a.env.stdout, "submitted job %s\n", j.ID)
	}
	printJob(a.env.stdout, &j)
	return nil
}

// jobOne runs a request on the job named by the only argument.
func jobOne(ctx context.Context, a *app, args []string, name, method, suffix string) error {
	fs := a.flags("jobs " + name)
	pos, err := parse(fs, args, false)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("jobs %s takes one argument: the job id", name)
	}
	var j jobView
	_, raw, err := a.client().do(ctx, method, "/v1/jobs/"+url.PathEscape(pos[0])+suffix, nil, &j)
	if err != nil || a.opts.json {
		return jsonOr(a, raw, err)
	}
	printJob(a.env.stdout, &j)
	return nil
}

// printJob shows one job.
func printJob(w io.Writer, j *jobView) {
	t := newTable(w)
	row(t, "ID:", j.ID)
	row(t, "Queue:", j.Queue)
	row(t, "Type:", j.Type)
	row(t, "State:", j.State)
	row(t, "Priority:", j.Priority)
	row(t, "Attempts:", j.attempts())
	row(t, "Run at:", showTime(j.RunAt))
	if j.StartBy != nil {
		row(t, "Start by:", showTime(j.StartBy))
	}
	if j.Deadline != nil {
		row(t, "Deadline:", showTime(j.Deadline))
	}
	if j.DebounceKey != "" {
		row(t, "Debounce key:", j.DebounceKey)
	}
	if sq := j.Sequence; sq != nil {
		v := sq.Key
		if sq.OnFailure != "" {
			v += " (on failure: " + sq.OnFailure + ")"
		}
		row(t, "Sequence:", v)
	}
	if len(j.Tags) > 0 {
		row(t, "Tags:", strings.Join(j.Tags, ", "))
	}
	if j.HeldBack != nil && j.State == "waiting" {
		row(t, "Held back:", j.HeldBack.Message)
	}
	row(t, "Created:", showTime(j.CreatedAt))
	if j.StartedAt != nil {
		row(t, "Started:", showTime(j.StartedAt))
	}
	if j.WorkerID != "" {
		row(t, "Worker:", j.WorkerID)
	}
	if j.FinishedAt != nil {
		row(t, "Finished:", showTime(j.FinishedAt))
	}
	if len(j.Payload) > 0 {
		row(t, "Payload:", string(j.Payload))
	}
	if len(j.Result) > 0 {
		row(t, "Result:", string(j.Result))
	}
	if j.LastError != "" {
		row(t, "Last error:", j.LastError)
	}
	if l := j.Logs; l != nil && (l.Lines > 0 || l.Dropped > 0) {
		v := plural(l.Lines, "line") + " (sundial jobs logs " + j.ID + ")"
		if l.Dropped > 0 {
			v += fmt.Sprintf(", %d older dropped", l.Dropped)
		}
		row(t, "Logs:", v)
	}
	if d := j.Durable; d != nil {
		for _, st := range d.Steps {
			v := string(st.Result)
			if st.Status == "err" {
				v = st.Error
			}
			row(t, fmt.Sprintf("Step %d:", st.Seq), st.Name+" "+st.Status+" "+v)
		}
		for _, sg := range d.Signals {
			row(t, "Signal:", sg.Name+" "+string(sg.Value))
		}
		if d.Awaiting != nil {
			what := "sleep"
			if d.Awaiting.Kind == "signal" {
				what = "signal " + d.Awaiting.Signal
			}
			row(t, "Awaiting:", what+" until "+showTime(d.Awaiting.Until))
		}
	}
	_ = t.Flush()
}

// jobsSignal handles "jobs signal ID NAME [VALUE] [--idempotency-key K]"
// and "jobs signal --queue Q --key K NAME [VALUE]": a signal for a durable
// job (docs/durable.md), its value JSON.
func jobsSignal(ctx context.Context, a *app, args []string) error {
	fs := a.flags("jobs signal")
	q := fs.String("queue", "", "with --key: the `queue` of the job that chose the key")
	key := fs.String("key", "", "send to the job that waits with this `key` instead of by id")
	idem := fs.String("idempotency-key", "", "the same `key` sent again answers duplicate instead of 409")
	pos, err := parse(fs, args, false)
	if err != nil {
		return err
	}
	want := 2
	if *key != "" {
		want = 1
	}
	if len(pos) < want || len(pos) > want+1 {
		return usagef("jobs signal takes ID NAME [VALUE], or --queue Q --key K NAME [VALUE]")
	}
	body := map[string]any{}
	if v := pos[len(pos)-1]; len(pos) == want+1 {
		if !json.Valid([]byte(v)) {
			return usagef("jobs signal: the value %q is not JSON (a string needs quotes: '\"ups\"')", v)
		}
		body["value"] = json.RawMessage(v)
	}
	if *idem != "" {
		body["idempotency_key"] = *idem
	}
	path := ""
	if *key != "" {
		if *q == "" {
			return usagef("jobs signal: --key needs --queue")
		}
		body["queue"], body["key"], body["name"] = *q, *key, pos[0]
		path = "/v1/signals"
	} else {
		path = "/v1/jobs/" + url.PathEscape(pos[0]) + "/signals/" + url.PathEscape(pos[1])
	}
	var out struct {
		Status string `json:"status"`
		JobID  string `json:"job_id"`
	}
	_, raw, err := a.client().do(ctx, "POST", path, body, &out)
	if err != nil || a.opts.json {
		return jsonOr(a, raw, err)
	}
	if out.JobID != "" {
		fmt.Fprintf(a.env.stdout, "%s (job %s)\n", out.Status, out.JobID)
	} else {
		fmt.Fprintln(a.env.stdout, out.Status)
	}
	return nil
}
