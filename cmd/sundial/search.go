package main

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// jobsSearch handles "jobs search [--queue Q] [--type T] [--group G]
// [--state S] [--tag TAG] [--payload FIELD=VALUE]… [--from T] [--to T]
// [--limit N] [--cursor C]": one page of the history search (GET /v1/jobs,
// newest first; the API needs a history store). --payload matches a
// top-level payload field's value, compared as a string.
func jobsSearch(ctx context.Context, a *app, args []string) error {
	fs := a.flags("jobs search")
	q := fs.String("queue", "", "only jobs of this `queue`")
	typ := fs.String("type", "", "only jobs of this `type`")
	group := fs.String("group", "", "only jobs of this fairness `group`")
	state := fs.String("state", "", "only jobs in this `state`")
	tag := fs.String("tag", "", "only jobs with this `tag`")
	var payload listFlag
	fs.Var(&payload, "payload", "only jobs whose payload's top-level `field=value` (repeatable; the value compared as a string)")
	from := fs.String("from", "", "only jobs created at or after this RFC 3339 `time`, or this long ago (2h)")
	to := fs.String("to", "", "only jobs created before this RFC 3339 `time`")
	limit := fs.Int("limit", 50, "jobs per page, 1-500")
	cursor := fs.String("cursor", "", "the `cursor` printed by the previous page")
	pos, err := parse(fs, args, false)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("jobs search takes flags only, not %q", pos[0])
	}
	v := url.Values{"limit": {strconv.Itoa(*limit)}}
	for name, val := range map[string]string{"queue": *q, "type": *typ, "group": *group, "state": *state, "tag": *tag, "to": *to, "cursor": *cursor} {
		if val != "" {
			v.Set(name, val)
		}
	}
	if *from != "" {
		t, err := sinceTime(*from, time.Now())
		if err != nil {
			return usagef("--from %q is neither an RFC 3339 time nor a duration such as 2h", *from)
		}
		v.Set("from", t.UTC().Format(time.RFC3339Nano))
	}
	for _, p := range payload {
		field, val, ok := strings.Cut(p, "=")
		if !ok || field == "" {
			return usagef("--payload takes field=value, not %q", p)
		}
		v.Add("payload."+field, val)
	}
	var page struct {
		Jobs       []jobView `json:"jobs"`
		NextCursor string    `json:"next_cursor"`
	}
	_, raw, err := a.client().do(ctx, "GET", "/v1/jobs?"+v.Encode(), nil, &page)
	if err != nil || a.opts.json {
		return jsonOr(a, raw, err)
	}
	w := newTable(a.env.stdout)
	row(w, "ID", "QUEUE", "TYPE", "STATE", "ATTEMPTS", "CREATED", "TAGS", "LAST ERROR")
	for _, j := range page.Jobs {
		row(w, j.ID, j.Queue, j.Type, j.State, j.attempts(), showTime(j.CreatedAt), orDash(strings.Join(j.Tags, ",")), oneLine(j.LastError))
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if page.NextCursor != "" {
		fmt.Fprintf(a.env.stdout, "more: --cursor %s\n", page.NextCursor)
	}
	return nil
}
