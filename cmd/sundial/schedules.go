package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"
)

// runSchedules handles "sundial schedules SUBCOMMAND".
func runSchedules(ctx context.Context, a *app, args []string) error {
	if len(args) == 0 {
		return usagef("schedules: give a subcommand: list, get, put, delete, enable, disable, trigger or info")
	}
	sub, args := args[0], args[1:]
	switch sub {
	case "list":
		return schedulesList(ctx, a, args)
	case "get":
		return scheduleOne(ctx, a, args, "get", "GET", "", nil)
	case "put":
		return schedulesPut(ctx, a, args)
	case "delete":
		return scheduleOne(ctx, a, args, "delete", "DELETE", "", nil)
	case "enable":
		return scheduleOne(ctx, a, args, "enable", "PATCH", "", []byte(`{"enabled": true}`))
	case "disable":
		return scheduleOne(ctx, a, args, "disable", "PATCH", "", []byte(`{"enabled": false}`))
	case "trigger":
		return scheduleOne(ctx, a, args, "trigger", "POST", "/trigger", nil)
	case "info":
		return schedulesInfo(ctx, a, args)
	}
	return usagef("schedules: unknown subcommand %q", sub)
}

// schedulesList handles "schedules list [--queue Q]".
func schedulesList(ctx context.Context, a *app, args []string) error {
	fs := a.flags("schedules list")
	q := fs.String("queue", "", "only schedules whose jobs go to `queue`")
	pos, err := parse(fs, args, false)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("schedules list takes no arguments")
	}
	list, raw, err := fetchSchedules(ctx, a, *q)
	if err != nil || a.opts.json {
		return jsonOr(a, raw, err)
	}
	w := newTable(a.env.stdout)
	row(w, "ID", "QUEUE", "TYPE", "TIMING", "TIMEZONE", "STATE", "NEXT RUN", "LAST RUN")
	for _, s := range list {
		row(w, s.ID, s.Job.Queue, s.Job.Type, s.timing(), s.Timezone, s.state(), s.show(s.NextRunAt), s.show(s.LastRunAt))
	}
	return w.Flush()
}

// fetchSchedules reads GET /v1/schedules.
func fetchSchedules(ctx context.Context, a *app, queue string) ([]scheduleView, []byte, error) {
	path := "/v1/schedules"
	if queue != "" {
		path += "?queue=" + url.QueryEscape(queue)
	}
	var out struct {
		Schedules []scheduleView `json:"schedules"`
	}
	_, raw, err := a.client().do(ctx, "GET", path, nil, &out)
	return out.Schedules, raw, err
}

// scheduleOne runs a request on one schedule named by the only argument.
func scheduleOne(ctx context.Context, a *app, args []string, name, method, suffix string, body []byte) error {
	fs := a.flags("schedules " + name)
	pos, err := parse(fs, args, false)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("schedules %s takes one argument: the schedule id", name)
	}
	path := "/v1/schedules/" + url.PathEscape(pos[0]) + suffix
	var reqBody any
	if body != nil {
		reqBody = body
	}
	if name == "trigger" {
		var j jobView
		_, raw, err := a.client().do(ctx, method, path, reqBody, &j)
		if err != nil || a.opts.json {
			return jsonOr(a, raw, err)
		}
		fmt.Fprintf(a.env.stdout, "triggered schedule %s: job %s (%s, queue %s)\n", pos[0], j.ID, j.State, j.Queue)
		return nil
	}
	var s scheduleView
	_, raw, err := a.client().do(ctx, method, path, reqBody, &s)
	if err != nil || a.opts.json && name != "delete" {
		return jsonOr(a, raw, err)
	}
	switch name {
	case "delete":
		if a.opts.json {
			_, err := fmt.Fprintf(a.env.stdout, "{\"deleted\": %q}\n", pos[0])
			return err
		}
		fmt.Fprintf(a.env.stdout, "deleted schedule %s\n", pos[0])
		return nil
	case "enable", "disable":
		fmt.Fprintf(a.env.stdout, "schedule %s %sd; next run %s\n", s.ID, name, s.show(s.NextRunAt))
		return nil
	}
	printSchedule(a.env.stdout, &s)
	return nil
}

// printSchedule shows one schedule in full.
func printSchedule(w io.Writer, s *scheduleView) {
	t := newTable(w)
	row(t, "ID:", s.ID)
	row(t, "Timing:", s.timing()+" ("+s.Timezone+")")
	row(t, "State:", s.state())
	row(t, "Misfire:", s.Misfire)
	prio := s.Job.Priority
	if prio == "" {
		prio = "normal"
	}
	row(t, "Job:", fmt.Sprintf("%s on queue %s, priority %s", s.Job.Type, s.Job.Queue, prio))
	if len(s.Job.Payload) > 0 {
		row(t, "Payload:", string(s.Job.Payload))
	}
	row(t, "Next run:", s.show(s.NextRunAt))
	row(t, "Last run:", s.show(s.LastRunAt))
	row(t, "Last job:", orDash(s.LastJobID))
	for i, u := range s.Upcoming {
		label := ""
		if i == 0 {
			label = "Upcoming:"
		}
		row(t, label, s.show(&u))
	}
	_ = t.Flush()
}

// schedulesPut handles "schedules put ID [-f FILE] [flags]": the schedule
// is read from a JSON file (or stdin with -f -), then the flags change it.
func schedulesPut(ctx context.Context, a *app, args []string) error {
	fs := a.flags("schedules put")
	file := fs.String("f", "", "read the schedule as JSON from `file` (- for stdin)")
	cron := fs.String("cron", "", "cron `expression`: 5 fields, 6 with seconds, or @hourly, @daily…")
	every := fs.String("every", "", "fixed interval: seconds or a `duration` such as 5m")
	tz := fs.String("tz", "", "IANA time `zone` of the cron expression, e.g. Europe/Berlin")
	typ := fs.String("type", "", "job `type`")
	queue := fs.String("queue", "", "job `queue`")
	payload := fs.String("payload", "", "job payload, `JSON`")
	priority := fs.String("priority", "", "job `priority`: high, normal or low")
	misfire := fs.String("misfire", "", "misfire `policy`: skip, run_once or run_all")
	disabled := fs.Bool("disabled", false, "store the schedule disabled")
	pos, err := parse(fs, args, false)
	if err != nil {
		return err
	}
	doc := map[string]any{}
	if *file != "" {
		if doc, err = readDoc(a, *file); err != nil {
			return err
		}
	}
	id, _ := doc["id"].(string)
	switch {
	case len(pos) == 1:
		id = pos[0]
	case len(pos) > 1 || id == "":
		return usagef("schedules put takes one argument: the schedule id (or an id in the -f file)")
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	job, _ := doc["job"].(map[string]any)
	if job == nil {
		job = map[string]any{}
	}
	if set["cron"] {
		doc["cron"] = *cron
		delete(doc, "every_seconds")
	}
	if set["every"] {
		secs, err := parseEvery(*every)
		if err != nil {
			return err
		}
		doc["every_seconds"] = secs
		delete(doc, "cron")
	}
	if set["tz"] {
		doc["timezone"] = *tz
	}
	if set["misfire"] {
		doc["misfire"] = *misfire
	}
	if set["disabled"] {
		doc["enabled"] = !*disabled
	}
	if set["type"] {
		job["type"] = *typ
	}
	if set["queue"] {
		job["queue"] = *queue
	}
	if set["priority"] {
		job["priority"] = *priority
	}
	if set["payload"] {
		if !json.Valid([]byte(*payload)) {
			return usagef("--payload is not valid JSON: %s", *payload)
		}
		job["payload"] = json.RawMessage(*payload)
	}
	doc["job"] = job
	delete(doc, "id")
	var s scheduleView
	status, raw, err := a.client().do(ctx, "PUT", "/v1/schedules/"+url.PathEscape(id), doc, &s)
	if err != nil || a.opts.json {
		return jsonOr(a, raw, err)
	}
	verb := "replaced"
	if status == 201 {
		verb = "created"
	}
	fmt.Fprintf(a.env.stdout, "%s schedule %s\n", verb, s.ID)
	printSchedule(a.env.stdout, &s)
	return nil
}

// readDoc reads a JSON object from file, or stdin for "-".
func readDoc(a *app, file string) (map[string]any, error) {
	var data []byte
	var err error
	if file == "-" {
		data, err = io.ReadAll(a.env.stdin)
	} else {
		data, err = os.ReadFile(file)
	}
	if err != nil {
		return nil, usagef("cannot read %s: %v", file, err)
	}
	var doc map[string]any
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil || doc == nil {
		return nil, usagef("%s does not hold a JSON object: %v", file, err)
	}
	return doc, nil
}

// jsonOr prints raw with --json when err is nil, and returns err.
func jsonOr(a *app, raw []byte, err error) error {
	if err != nil {
		return err
	}
	return printJSON(a.env.stdout, raw)
}
