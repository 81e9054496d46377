package main

import (
	"context"
	"fmt"
	"net/url"
	"time"
)

// auditRecord is a record of GET /v1/audit.
type auditRecord struct {
	ID    string    `json:"id"`
	At    time.Time `json:"at"`
	Actor struct {
		Kind string `json:"kind"`
		ID   string `json:"id"`
		Name string `json:"name"`
		IP   string `json:"ip"`
	} `json:"actor"`
	RequestID string `json:"request_id"`
	Action    string `json:"action"`
	Target    string `json:"target"`
	Filter    string `json:"filter"`
	Outcome   string `json:"outcome"`
	Status    int    `json:"status"`
	Detail    string `json:"detail"`
}

// runAudit handles "sundial audit": a page of the audit log, newest first.
func runAudit(ctx context.Context, a *app, args []string) error {
	fs := a.flags("audit")
	actor := fs.String("actor", "", "only records of this actor `id` (key:… or a user's subject)")
	action := fs.String("action", "", "only records of this `action` (job.cancel, queue.pause…)")
	target := fs.String("target", "", "only records of this `target` (job:ID, queue:NAME…)")
	since := fs.String("since", "", "only records at or after this RFC 3339 `time` or this duration back from now (2h)")
	until := fs.String("until", "", "only records before this RFC 3339 `time`")
	limit := fs.Int("limit", 50, "records per page, 1-500")
	cursor := fs.String("cursor", "", "the `cursor` of the next page, as printed")
	pos, err := parse(fs, args, false)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("audit takes no arguments; filter with --actor, --action, --target, --since, --until")
	}
	q := url.Values{}
	set := func(k, v string) {
		if v != "" {
			q.Set(k, v)
		}
	}
	set("actor", *actor)
	set("action", *action)
	set("target", *target)
	set("until", *until)
	set("cursor", *cursor)
	if *since != "" {
		if d, err := time.ParseDuration(*since); err == nil {
			q.Set("since", time.Now().Add(-d).UTC().Format(time.RFC3339))
		} else {
			q.Set("since", *since)
		}
	}
	q.Set("limit", fmt.Sprint(*limit))
	var out struct {
		Records    []auditRecord `json:"records"`
		NextCursor string        `json:"next_cursor"`
	}
	_, raw, err := a.client().do(ctx, "GET", "/v1/audit?"+q.Encode(), nil, &out)
	if err != nil || a.opts.json {
		return jsonOr(a, raw, err)
	}
	w := newTable(a.env.stdout)
	row(w, "AT", "ACTOR", "ACTION", "TARGET", "OUTCOME", "REQUEST", "DETAIL")
	for _, r := range out.Records {
		who := orDash(r.Actor.ID)
		if r.Actor.Name != "" {
			who += " (" + r.Actor.Name + ")"
		}
		if r.Actor.ID == "" {
			who = r.Actor.Kind
		}
		detail := r.Detail
		if r.Filter != "" {
			detail = r.Filter + " " + detail
		}
		row(w, r.At.UTC().Format(time.RFC3339), who, r.Action, orDash(r.Target),
			fmt.Sprintf("%s %d", r.Outcome, r.Status), orDash(r.RequestID), orDash(detail))
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if out.NextCursor != "" {
		fmt.Fprintf(a.env.stdout, "more: --cursor %s\n", out.NextCursor)
	}
	return nil
}
