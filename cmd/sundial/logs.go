package main

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// logLine is one line of a job's log (GET /v1/jobs/{id}/logs).
type logLine struct {
	Seq     int64             `json:"seq"`
	At      time.Time         `json:"at"`
	Attempt int               `json:"attempt"`
	Level   string            `json:"level"`
	Message string            `json:"message"`
	Fields  map[string]string `json:"fields"`
}

// logPage is one page of a job's log.
type logPage struct {
	Lines     []logLine `json:"lines"`
	Dropped   int64     `json:"dropped"`
	NextAfter int64     `json:"next_after"`
}

// logPoll is how often jobs logs --follow reads new lines.
var logPoll = time.Second

// logPageSize is the lines asked for a page (the API's most).
const logPageSize = 1000

// jobsLogs handles "jobs logs ID [--after SEQ] [--follow]": the lines the
// job's handlers logged (ctx.log, worker.Logger), oldest first, one a line
// as "<time> <level> <message> k=v …"; with --follow it reads new lines
// (?after=) once a second until the job is in a final state. --json prints
// each page the API answered.
func jobsLogs(ctx context.Context, a *app, args []string) error {
	fs := a.flags("jobs logs")
	after := fs.Int64("after", 0, "only the lines after the line numbered `seq`")
	follow := fs.Bool("follow", false, "keep printing new lines, once a second, until the job ends")
	fs.BoolVar(follow, "f", false, "short for --follow")
	pos, err := parse(fs, args, false)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("jobs logs takes one argument: the job id")
	}
	id := pos[0]
	path := "/v1/jobs/" + url.PathEscape(id)
	next := *after
	var dropped int64
	for {
		// Read the job's state before its lines: the lines read after it
		// ended are then all it has.
		var j jobView
		if *follow {
			if _, _, err := a.client().do(ctx, "GET", path, nil, &j); err != nil {
				return err
			}
		}
		for {
			v := url.Values{"limit": {strconv.Itoa(logPageSize)}}
			if next > 0 {
				v.Set("after", strconv.FormatInt(next, 10))
			}
			var page logPage
			_, raw, err := a.client().do(ctx, "GET", path+"/logs?"+v.Encode(), nil, &page)
			if err != nil {
				return err
			}
			if a.opts.json {
				if err := printJSON(a.env.stdout, raw); err != nil {
					return err
				}
			} else {
				if page.Dropped > dropped {
					if dropped == 0 && next == *after {
						fmt.Fprintf(a.env.stderr, "(%d older lines were dropped: a job keeps its last lines up to a cap)\n", page.Dropped)
					} else {
						fmt.Fprintf(a.env.stderr, "(%d lines were dropped before they were read)\n", page.Dropped-dropped)
					}
				}
				for _, l := range page.Lines {
					printLogLine(a.env.stdout, l)
				}
			}
			dropped = max(dropped, page.Dropped)
			more := len(page.Lines) == logPageSize && page.NextAfter > next
			if page.NextAfter > next {
				next = page.NextAfter
			}
			if !more {
				break
			}
		}
		if !*follow || final(j.State) {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil // Ctrl-C ends a follow
		case <-time.After(logPoll):
		}
	}
}

// printLogLine prints "<time> <level> <message> k=v …", the fields sorted
// by name, a value with spaces or quotes quoted.
func printLogLine(w io.Writer, l logLine) {
	var b strings.Builder
	b.WriteString(l.At.UTC().Format("2006-01-02T15:04:05.000Z"))
	b.WriteByte(' ')
	fmt.Fprintf(&b, "%-5s ", l.Level)
	b.WriteString(strings.ReplaceAll(l.Message, "\n", `\n`))
	keys := make([]string, 0, len(l.Fields))
	for k := range l.Fields {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		v := l.Fields[k]
		if v == "" || strings.ContainsAny(v, " \t\n\"=") {
			v = strconv.Quote(v)
		}
		fmt.Fprintf(&b, " %s=%s", k, v)
	}
	fmt.Fprintln(w, b.String())
}
