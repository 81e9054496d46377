package main

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"

	"github.com/sundialhq/sundial/pkg/queue"
)

// runBatches handles "sundial batches SUBCOMMAND".
func runBatches(ctx context.Context, a *app, args []string) error {
	if len(args) == 0 {
		return usagef("batches: give a subcommand: submit, get, cancel, retry")
	}
	switch args[0] {
	case "submit":
		return batchesSubmit(ctx, a, args[1:])
	case "get", "cancel", "retry":
		return batchOne(ctx, a, args[0], args[1:])
	}
	return usagef("batches: unknown subcommand %q (submit, get, cancel, retry)", args[0])
}

// batchesSubmit handles "batches submit -f FILE [--id ID]": the document
// of POST /v1/batches (docs/workflows.md, "Batches").
func batchesSubmit(ctx context.Context, a *app, args []string) error {
	fs := a.flags("batches submit")
	file := fs.String("f", "", "read the batch as JSON from `file` (- for stdin; required)")
	id := fs.String("id", "", "the batch's `id` (instead of the document's)")
	pos, err := parse(fs, args, false)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("batches submit takes flags only, not %q", pos[0])
	}
	if *file == "" {
		return usagef("batches submit needs -f FILE (- for stdin)")
	}
	doc, err := readDoc(a, *file)
	if err != nil {
		return err
	}
	if *id != "" {
		doc["id"] = *id
	}
	var out struct {
		Batch  queue.BatchInfo `json:"batch"`
		JobIDs []string        `json:"job_ids"`
	}
	_, raw, err := a.client().do(ctx, "POST", "/v1/batches", doc, &out)
	if err != nil || a.opts.json {
		return jsonOr(a, raw, err)
	}
	fmt.Fprintf(a.env.stdout, "submitted batch %s: %d jobs\n", out.Batch.ID, len(out.JobIDs))
	return printBatch(a.env.stdout, &out.Batch)
}

// batchOne handles "batches get|cancel|retry ID".
func batchOne(ctx context.Context, a *app, name string, args []string) error {
	fs := a.flags("batches " + name)
	pos, err := parse(fs, args, false)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("batches %s takes one argument: the batch id", name)
	}
	path := "/v1/batches/" + url.PathEscape(pos[0])
	if name == "get" {
		var b queue.BatchInfo
		_, raw, err := a.client().do(ctx, "GET", path, nil, &b)
		if err != nil || a.opts.json {
			return jsonOr(a, raw, err)
		}
		return printBatch(a.env.stdout, &b)
	}
	var n map[string]int
	_, raw, err := a.client().do(ctx, "POST", path+"/"+name, nil, &n)
	if err != nil || a.opts.json {
		return jsonOr(a, raw, err)
	}
	if name == "cancel" {
		fmt.Fprintf(a.env.stdout, "cancelled %d jobs of batch %s\n", n["cancelled"], pos[0])
	} else {
		fmt.Fprintf(a.env.stdout, "retried %d jobs of batch %s\n", n["retried"], pos[0])
	}
	return nil
}

// printBatch shows one batch.
func printBatch(w io.Writer, b *queue.BatchInfo) error {
	t := newTable(w)
	row(t, "ID:", b.ID)
	row(t, "Total:", strconv.Itoa(b.Total))
	row(t, "Sealed:", strconv.FormatBool(b.Sealed))
	c := b.Counts
	row(t, "Counts:", fmt.Sprintf("pending %d, succeeded %d, dead %d, cancelled %d", c.Pending, c.Succeeded, c.Dead, c.Cancelled))
	for _, cb := range []struct {
		name string
		cb   *queue.BatchCallback
	}{{"On success:", b.OnSuccess}, {"On complete:", b.OnComplete}} {
		if cb.cb != nil {
			row(t, cb.name, strings.TrimSpace(cb.cb.State+" "+cb.cb.JobID)) // no job id until fired
		}
	}
	return t.Flush()
}
