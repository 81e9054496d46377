package main

import (
	"context"
	"fmt"
	"slices"
)

// runWorkflows handles "sundial workflows SUBCOMMAND".
func runWorkflows(ctx context.Context, a *app, args []string) error {
	if len(args) == 0 || args[0] != "submit" {
		return usagef("workflows: give a subcommand: submit")
	}
	return workflowsSubmit(ctx, a, args[1:])
}

// workflowsSubmit handles "workflows submit -f FILE [--id ID]": the
// document of POST /v1/workflows (docs/workflows.md).
func workflowsSubmit(ctx context.Context, a *app, args []string) error {
	fs := a.flags("workflows submit")
	file := fs.String("f", "", "read the workflow as JSON from `file` (- for stdin; required)")
	id := fs.String("id", "", "the workflow's `id` (instead of the document's): a repeat with the same id stores nothing twice")
	pos, err := parse(fs, args, false)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("workflows submit takes flags only, not %q", pos[0])
	}
	if *file == "" {
		return usagef("workflows submit needs -f FILE (- for stdin)")
	}
	doc, err := readDoc(a, *file)
	if err != nil {
		return err
	}
	if *id != "" {
		doc["id"] = *id
	}
	var wf struct {
		ID    string             `json:"id"`
		Steps map[string]jobView `json:"steps"`
	}
	status, raw, err := a.client().do(ctx, "POST", "/v1/workflows", doc, &wf)
	if err != nil || a.opts.json {
		return jsonOr(a, raw, err)
	}
	if status == 200 {
		fmt.Fprintf(a.env.stdout, "workflow %s was submitted before; nothing new stored\n", wf.ID)
	} else {
		fmt.Fprintf(a.env.stdout, "submitted workflow %s\n", wf.ID)
	}
	names := make([]string, 0, len(wf.Steps))
	for n := range wf.Steps {
		names = append(names, n)
	}
	slices.Sort(names)
	tw := newTable(a.env.stdout)
	row(tw, "STEP", "JOB", "QUEUE", "TYPE", "STATE")
	for _, n := range names {
		j := wf.Steps[n]
		row(tw, n, j.ID, j.Queue, j.Type, j.State)
	}
	return tw.Flush()
}
