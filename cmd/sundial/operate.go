package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/coder/websocket"
)

// jobsList handles "jobs list QUEUE [--state S] [--type T] [--priority P]
// [--limit N] [--cursor C]": one page of the queue's live jobs
// (GET /v1/queues/{q}/jobs).
func jobsList(ctx context.Context, a *app, args []string) error {
	fs := a.flags("jobs list")
	state := fs.String("state", "queued", "`state`: queued, scheduled, waiting, active or dead")
	typ := fs.String("type", "", "only jobs of this `type`")
	prio := fs.String("priority", "", "only jobs of this `priority`")
	tag := fs.String("tag", "", "only jobs with this `tag`")
	limit := fs.Int("limit", 50, "jobs per page, 1-500")
	cursor := fs.String("cursor", "", "the `cursor` printed by the previous page")
	pos, err := parse(fs, args, false)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("jobs list takes one argument: the queue name")
	}
	v := url.Values{"state": {*state}, "limit": {strconv.Itoa(*limit)}}
	for name, val := range map[string]string{"type": *typ, "priority": *prio, "tag": *tag, "cursor": *cursor} {
		if val != "" {
			v.Set(name, val)
		}
	}
	var page struct {
		Jobs       []jobView `json:"jobs"`
		NextCursor string    `json:"next_cursor"`
	}
	_, raw, err := a.client().do(ctx, "GET", "/v1/queues/"+url.PathEscape(pos[0])+"/jobs?"+v.Encode(), nil, &page)
	if err != nil || a.opts.json {
		return jsonOr(a, raw, err)
	}
	w := newTable(a.env.stdout)
	row(w, "ID", "TYPE", "PRIORITY", "ATTEMPTS", "RUN AT", "WORKER", "TAGS", "LAST ERROR")
	for _, j := range page.Jobs {
		row(w, j.ID, j.Type, j.Priority, j.attempts(), showTime(j.RunAt), orDash(j.WorkerID), orDash(strings.Join(j.Tags, ",")), oneLine(j.LastError))
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if page.NextCursor != "" {
		fmt.Fprintf(a.env.stdout, "more: --cursor %s\n", page.NextCursor)
	}
	return nil
}

// final tells whether a job state is final.
func final(state string) bool {
	return state == "succeeded" || state == "dead" || state == "cancelled"
}

// jobsWait handles "jobs wait ID [--for DURATION]": it follows the job's
// events on the live stream until the job reaches a final state, then
// prints it. Exit 0 when it succeeded, 1 when it ended dead or cancelled
// or is still running when --for runs out. The job is also read every
// few seconds, in case the stream is lost.
func jobsWait(ctx context.Context, a *app, args []string) error {
	fs := a.flags("jobs wait")
	limit := fs.Duration("for", 0, "give up after this `duration` (0: wait as long as it takes)")
	pos, err := parse(fs, args, false)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("jobs wait takes one argument: the job id")
	}
	id := pos[0]
	if *limit > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, *limit)
		defer cancel()
	}
	// Events: the stream says when the job may have changed; without it,
	// the job is read again every few seconds.
	changed := make(chan struct{}, 1)
	if dial, err := a.streamDialer(ctx, url.Values{"job": {id}}); err == nil {
		if conn, err := dial(); err == nil {
			defer conn.CloseNow()
			go notifyEvents(ctx, conn, changed)
		}
	}
	var j jobView
	var raw []byte
	for {
		if _, raw, err = a.client().do(ctx, "GET", "/v1/jobs/"+url.PathEscape(id), nil, &j); err != nil {
			if ctx.Err() != nil && *limit > 0 {
				return fmt.Errorf("job %s did not end within %s", id, *limit)
			}
			return err
		}
		if final(j.State) {
			break
		}
		select {
		case <-ctx.Done():
			if *limit > 0 {
				return fmt.Errorf("job %s is still %s after %s", id, j.State, *limit)
			}
			return ctx.Err()
		case <-changed:
		case <-time.After(5 * time.Second):
		}
	}
	if a.opts.json {
		if err := printJSON(a.env.stdout, raw); err != nil {
			return err
		}
	} else {
		printJob(a.env.stdout, &j)
	}
	if j.State != "succeeded" {
		return fmt.Errorf("job %s ended %s", id, j.State)
	}
	return nil
}

// notifyEvents signals changed (without blocking) for each job event conn
// delivers, until it fails.
func notifyEvents(ctx context.Context, conn *websocket.Conn, changed chan<- struct{}) {
	for {
		_, data, err := conn.Read(ctx)
		if err != nil {
			return
		}
		var msg struct {
			Kind string `json:"kind"`
		}
		if json.Unmarshal(data, &msg) != nil || msg.Kind != "event" {
			continue
		}
		select {
		case changed <- struct{}{}:
		default:
		}
	}
}

// jobsBulk handles "jobs bulk retry|cancel|delete|move QUEUE [ID…]
// [filters]": one bulk action done by the server
// (POST /v1/queues/{q}/jobs/bulk).
func jobsBulk(ctx context.Context, a *app, args []string) error {
	if len(args) == 0 {
		return usagef("jobs bulk: give an action: retry, cancel, delete or move")
	}
	action, args := args[0], args[1:]
	switch action {
	case "retry", "cancel", "delete", "move":
	default:
		return usagef("jobs bulk: unknown action %q (retry, cancel, delete or move)", action)
	}
	fs := a.flags("jobs bulk " + action)
	state := fs.String("state", "", "filter: the jobs' `state` (dead; cancel: queued, scheduled or waiting)")
	typ := fs.String("type", "", "filter: only jobs of this `type`")
	tag := fs.String("tag", "", "filter: only jobs with this `tag`")
	errText := fs.String("error-contains", "", "filter: only jobs whose last error contains this `text`")
	since := fs.String("since", "", "filter: only jobs that died (or were created) at or after this RFC 3339 `time`, or this long ago (1h)")
	to := fs.String("to", "", "move: the `queue` the jobs go to")
	yes := fs.Bool("yes", false, "confirm a filter that selects every job of the state (delete, cancel, move)")
	pos, err := parse(fs, args, false)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return usagef("jobs bulk %s needs the queue name", action)
	}
	q, ids := pos[0], pos[1:]
	body := map[string]any{"action": action}
	if *to != "" {
		body["to_queue"] = *to
	}
	if len(ids) > 0 {
		if *state != "" || *typ != "" || *tag != "" || *errText != "" || *since != "" {
			return usagef("jobs bulk: give job ids or filter flags, not both")
		}
		body["ids"] = ids
	} else {
		filter := map[string]any{}
		for name, v := range map[string]string{"state": *state, "type": *typ, "tag": *tag, "error_contains": *errText} {
			if v != "" {
				filter[name] = v
			}
		}
		if *since != "" {
			t, err := sinceTime(*since, time.Now())
			if err != nil {
				return err
			}
			filter["since"] = t.UTC().Format(time.RFC3339Nano)
		}
		if action != "retry" && *typ == "" && *tag == "" && *errText == "" && *since == "" && !*yes {
			return usagef("jobs bulk %s without ids or a --type, --tag, --error-contains or --since filter acts on every such job of %s: add --yes", action, q)
		}
		body["filter"] = filter
	}
	var res struct {
		Matched int    `json:"matched"`
		Count   int    `json:"count"`
		Scanned int    `json:"scanned"`
		ToQueue string `json:"to_queue"`
	}
	_, raw, err := a.client().do(ctx, "POST", "/v1/queues/"+url.PathEscape(q)+"/jobs/bulk", body, &res)
	if err != nil || a.opts.json {
		return jsonOr(a, raw, err)
	}
	verb := map[string]string{"retry": "retried", "cancel": "cancelled", "delete": "deleted", "move": "moved"}[action]
	where := "in " + q
	if action == "move" {
		where = "from " + q + " to " + res.ToQueue
	}
	fmt.Fprintf(a.env.stdout, "%s %s of %d selected %s", verb, plural(res.Count, "job"), res.Matched, where)
	if len(ids) == 0 {
		fmt.Fprintf(a.env.stdout, " (%d read)", res.Scanned)
	}
	fmt.Fprintln(a.env.stdout)
	return nil
}

// sinceTime reads --since: an RFC 3339 time, or a duration back from now.
func sinceTime(s string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	if d, err := time.ParseDuration(s); err == nil && d >= 0 {
		return now.Add(-d), nil
	}
	return time.Time{}, usagef("--since %q is neither an RFC 3339 time nor a duration such as 1h", s)
}

// queueAction handles "queues pause|resume|forget QUEUE".
func queueAction(ctx context.Context, a *app, action, q string) error {
	method, path := "POST", "/v1/queues/"+url.PathEscape(q)+"/"+action
	if action == "forget" {
		method, path = "DELETE", "/v1/queues/"+url.PathEscape(q)
	}
	_, raw, err := a.client().do(ctx, method, path, nil, nil)
	if err != nil || (a.opts.json && len(raw) > 0) {
		return jsonOr(a, raw, err)
	}
	done := map[string]string{"pause": "paused", "resume": "resumed", "forget": "forgot"}[action]
	fmt.Fprintf(a.env.stdout, "%s queue %s\n", done, q)
	return nil
}

// runWorkers handles "sundial workers": the live workers (GET /v1/workers).
func runWorkers(ctx context.Context, a *app, args []string) error {
	fs := a.flags("workers")
	pos, err := parse(fs, args, false)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("workers takes no arguments")
	}
	var out struct {
		Workers []struct {
			ID          string    `json:"id"`
			Hostname    string    `json:"hostname"`
			PID         int       `json:"pid"`
			Queues      []string  `json:"queues"`
			Types       []string  `json:"types"`
			Concurrency int       `json:"concurrency"`
			ActiveJobs  []string  `json:"active_jobs"`
			LastSeenAt  time.Time `json:"last_seen_at"`
			Processed   int64     `json:"processed"`
			Failed      int64     `json:"failed"`
		} `json:"workers"`
	}
	_, raw, err := a.client().do(ctx, "GET", "/v1/workers", nil, &out)
	if err != nil || a.opts.json {
		return jsonOr(a, raw, err)
	}
	now := time.Now()
	w := newTable(a.env.stdout)
	row(w, "ID", "HOST", "PID", "QUEUES", "TYPES", "RUNNING", "PROCESSED", "FAILED", "LAST SEEN")
	for _, wk := range out.Workers {
		types := "any"
		if wk.Types != nil {
			types = orDash(strings.Join(wk.Types, ","))
		}
		row(w, wk.ID, wk.Hostname, wk.PID, strings.Join(wk.Queues, ","), types,
			fmt.Sprintf("%d/%d", len(wk.ActiveJobs), wk.Concurrency), wk.Processed, wk.Failed, relative(&wk.LastSeenAt, now))
	}
	return w.Flush()
}
