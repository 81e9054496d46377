package main

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"strings"
)

// runQueues handles "sundial queues [QUEUE]" and "sundial queues
// pause|resume|forget QUEUE".
func runQueues(ctx context.Context, a *app, args []string) error {
	fs := a.flags("queues")
	pos, err := parse(fs, args, false)
	if err != nil {
		return err
	}
	if len(pos) == 2 && (pos[0] == "pause" || pos[0] == "resume" || pos[0] == "forget") {
		return queueAction(ctx, a, pos[0], pos[1])
	}
	var queues []queueView
	var raw []byte
	switch len(pos) {
	case 0:
		var out struct {
			Queues []queueView `json:"queues"`
		}
		_, raw, err = a.client().do(ctx, "GET", "/v1/queues", nil, &out)
		queues = out.Queues
	case 1:
		var q queueView
		_, raw, err = a.client().do(ctx, "GET", "/v1/queues/"+url.PathEscape(pos[0]), nil, &q)
		queues = []queueView{q}
	default:
		return usagef("queues takes a queue name, or pause, resume or forget and a queue name")
	}
	if err != nil || a.opts.json {
		return jsonOr(a, raw, err)
	}
	w := newTable(a.env.stdout)
	row(w, "QUEUE", "PAUSED", "HIGH", "NORMAL", "LOW", "THROTTLED", "UNHANDLED", "SCHEDULED", "WAITING", "ACTIVE", "DEAD", "SUCCEEDED", "FAILED", "JOBS/S")
	for _, q := range queues {
		paused := "no"
		if q.Paused {
			paused = "yes"
		}
		row(w, q.Name, paused, q.Queued.High, q.Queued.Normal, q.Queued.Low, q.Throttled, q.Unhandled, q.Scheduled, q.Waiting, q.Active, q.Dead,
			q.SucceededTotal, q.FailedTotal, strconv.FormatFloat(q.ProcessedPerSecond, 'f', 1, 64))
	}
	return w.Flush()
}

// runDead handles "sundial dead list|retry|purge QUEUE".
func runDead(ctx context.Context, a *app, args []string) error {
	if len(args) == 0 {
		return usagef("dead: give a subcommand: list, retry or purge")
	}
	sub, args := args[0], args[1:]
	fs := a.flags("dead " + sub)
	var limit *int
	var cursor, tag *string
	var yes *bool
	switch sub {
	case "list":
		limit = fs.Int("limit", 50, "jobs per page, 1-500")
		cursor = fs.String("cursor", "", "the `cursor` printed by the previous page")
		tag = fs.String("tag", "", "only dead jobs with this `tag`")
	case "retry":
	case "purge":
		yes = fs.Bool("yes", false, "confirm purging every dead job of the queue (needed without ids)")
	default:
		return usagef("dead: unknown subcommand %q", sub)
	}
	pos, err := parse(fs, args, false)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return usagef("dead %s needs the queue name", sub)
	}
	q, ids := pos[0], pos[1:]
	base := "/v1/queues/" + url.PathEscape(q) + "/dead"
	if sub == "list" {
		if len(ids) > 0 {
			return usagef("dead list takes one argument: the queue name")
		}
		return deadList(ctx, a, base, *limit, *cursor, *tag)
	}
	var body any
	if len(ids) > 0 {
		body = map[string]any{"ids": ids}
	} else if sub == "purge" && !*yes {
		return usagef("dead purge without job ids deletes every dead job of %s: add --yes", q)
	}
	method, path, key := "POST", base+"/retry", "retried"
	if sub == "purge" {
		method, path, key = "DELETE", base, "deleted"
	}
	out := map[string]int{}
	_, raw, err := a.client().do(ctx, method, path, body, &out)
	if err != nil || a.opts.json {
		return jsonOr(a, raw, err)
	}
	fmt.Fprintf(a.env.stdout, "%s %s from the dead letters of %s\n", key, plural(out[key], "job"), q)
	return nil
}

// deadList prints one page of dead letters.
func deadList(ctx context.Context, a *app, base string, limit int, cursor, tag string) error {
	v := url.Values{"limit": {strconv.Itoa(limit)}}
	if cursor != "" {
		v.Set("cursor", cursor)
	}
	if tag != "" {
		v.Set("tag", tag)
	}
	var page struct {
		Jobs       []jobView `json:"jobs"`
		NextCursor string    `json:"next_cursor"`
	}
	_, raw, err := a.client().do(ctx, "GET", base+"?"+v.Encode(), nil, &page)
	if err != nil || a.opts.json {
		return jsonOr(a, raw, err)
	}
	w := newTable(a.env.stdout)
	row(w, "ID", "TYPE", "ATTEMPTS", "DIED", "TAGS", "LAST ERROR")
	for _, j := range page.Jobs {
		row(w, j.ID, j.Type, j.attempts(), showTime(j.FinishedAt), orDash(strings.Join(j.Tags, ",")), oneLine(j.LastError))
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if page.NextCursor != "" {
		fmt.Fprintf(a.env.stdout, "more: --cursor %s\n", page.NextCursor)
	}
	return nil
}

// oneLine shortens an error message for a table cell.
func oneLine(s string) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if len(s) > 80 {
		s = s[:77] + "..."
	}
	return orDash(s)
}
