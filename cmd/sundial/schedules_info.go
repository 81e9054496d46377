package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// schedulesInfo handles "schedules info [-R] [-i INTERVAL] [--queue Q]":
// every schedule ordered by its next run, with a summary line; -R groups
// them by queue; -i redraws every interval until interrupted.
func schedulesInfo(ctx context.Context, a *app, args []string) error {
	fs := a.flags("schedules info")
	byQueue := fs.Bool("R", false, "group by queue")
	interval := fs.Duration("i", 0, "redraw every `interval` (e.g. 2s) until Ctrl-C")
	q := fs.String("queue", "", "only schedules whose jobs go to `queue`")
	pos, err := parse(fs, args, false)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("schedules info takes no arguments")
	}
	if *interval < 0 || *interval > 0 && *interval < 100*time.Millisecond {
		return usagef("-i must be at least 100ms")
	}
	for {
		list, raw, err := fetchSchedules(ctx, a, *q)
		if err != nil {
			return err
		}
		if *interval > 0 && isTerminal(a.env.stdout) {
			fmt.Fprint(a.env.stdout, "\033[H\033[2J") // home, clear screen
		}
		if a.opts.json {
			err = printJSON(a.env.stdout, raw)
		} else {
			err = printInfo(a.env.stdout, list, *byQueue, time.Now())
		}
		if err != nil || *interval == 0 {
			return err
		}
		fmt.Fprintf(a.env.stdout, "\nEvery %v; Ctrl-C to stop.\n", *interval)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(*interval):
		}
	}
}

// printInfo writes the summary and the table(s) of info.
func printInfo(w io.Writer, list []scheduleView, byQueue bool, now time.Time) error {
	slices.SortStableFunc(list, func(x, y scheduleView) int {
		switch {
		case x.NextRunAt == nil && y.NextRunAt == nil:
			return strings.Compare(x.ID, y.ID)
		case x.NextRunAt == nil:
			return 1
		case y.NextRunAt == nil:
			return -1
		}
		return x.NextRunAt.Compare(*y.NextRunAt)
	})
	fmt.Fprintln(w, summary("", list, now))
	if !byQueue {
		return infoTable(w, list, now, "")
	}
	groups := map[string][]scheduleView{}
	var names []string
	for _, s := range list {
		if _, ok := groups[s.Job.Queue]; !ok {
			names = append(names, s.Job.Queue)
		}
		groups[s.Job.Queue] = append(groups[s.Job.Queue], s)
	}
	slices.Sort(names)
	for _, n := range names {
		fmt.Fprintf(w, "\n%s\n", summary(n, groups[n], now))
		if err := infoTable(w, groups[n], now, "  "); err != nil {
			return err
		}
	}
	return nil
}

// summary counts schedules and names the next to fire.
func summary(queue string, list []scheduleView, now time.Time) string {
	enabled := 0
	for _, s := range list {
		if s.Enabled {
			enabled++
		}
	}
	head := plural(len(list), "schedule")
	if queue != "" {
		head = "Queue " + queue + ": " + head
	}
	line := fmt.Sprintf("%s, %d enabled, %d disabled", head, enabled, len(list)-enabled)
	if len(list) > 0 && list[0].NextRunAt != nil {
		line += fmt.Sprintf("; next: %s %s", list[0].ID, relative(list[0].NextRunAt, now))
	}
	return line
}

func infoTable(w io.Writer, list []scheduleView, now time.Time, indent string) error {
	if len(list) == 0 {
		return nil
	}
	t := newTable(w)
	row(t, indent+"ID", "QUEUE", "TIMING", "STATE", "NEXT RUN", "IN", "LAST RUN", "LAST JOB")
	for _, s := range list {
		row(t, indent+s.ID, s.Job.Queue, s.timing(), s.state(), s.show(s.NextRunAt), relative(s.NextRunAt, now), s.show(s.LastRunAt), orDash(s.LastJobID))
	}
	return t.Flush()
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}

// isTerminal reports whether w is a terminal, where redrawing makes sense.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// parseEvery reads an interval as whole seconds ("300") or a duration of
// whole seconds ("5m", "1h30m").
func parseEvery(v string) (int, error) {
	if n, err := strconv.Atoi(v); err == nil {
		return n, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d%time.Second != 0 {
		return 0, usagef("--every wants whole seconds, such as 300 or 5m, not %q", v)
	}
	return int(d / time.Second), nil
}
