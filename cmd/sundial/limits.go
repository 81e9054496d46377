package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// limitView is a limit as GET /v1/queues/{q}/limits answers it.
type limitView struct {
	Name        string   `json:"name"`
	Types       []string `json:"types"`
	Key         string   `json:"key"`
	Concurrency int      `json:"concurrency"`
	Rate        *struct {
		Limit         int `json:"limit"`
		PeriodSeconds int `json:"period_seconds"`
	} `json:"rate"`
	Active    int64 `json:"active"`
	Throttled int64 `json:"throttled"`
}

// runLimits handles "sundial limits list|set|delete QUEUE [NAME]".
func runLimits(ctx context.Context, a *app, args []string) error {
	if len(args) == 0 {
		return usagef("limits: give a subcommand: list, set or delete")
	}
	sub, args := args[0], args[1:]
	fs := a.flags("limits " + sub)
	var types, key, rate *string
	var conc *int
	want := 2
	switch sub {
	case "list":
		want = 1
	case "set":
		types = fs.String("types", "", "comma-separated job `types` it covers (default: every type of the queue)")
		key = fs.String("key", "", "a top-level payload `field` whose every value gets its own caps")
		conc = fs.Int("concurrency", 0, "at most this many covered jobs active at once, 1-10000")
		rate = fs.String("rate", "", "at most `N/PERIOD` covered jobs started in any window, e.g. 100/1m")
	case "delete":
	default:
		return usagef("limits: unknown subcommand %q", sub)
	}
	pos, err := parse(fs, args, false)
	if err != nil {
		return err
	}
	if len(pos) != want {
		if want == 1 {
			return usagef("limits list takes one argument: the queue name")
		}
		return usagef("limits %s needs the queue name and the limit's name", sub)
	}
	base := "/v1/queues/" + url.PathEscape(pos[0]) + "/limits"
	switch sub {
	case "list":
		var out struct {
			Limits []limitView `json:"limits"`
		}
		_, raw, err := a.client().do(ctx, "GET", base, nil, &out)
		if err != nil || a.opts.json {
			return jsonOr(a, raw, err)
		}
		w := newTable(a.env.stdout)
		row(w, "LIMIT", "TYPES", "KEY", "CONCURRENCY", "RATE", "ACTIVE", "THROTTLED")
		for _, l := range out.Limits {
			row(w, l.Name, orDash(strings.Join(l.Types, ",")), orDash(l.Key), orDash(nonZero(l.Concurrency)),
				orDash(l.rate()), l.Active, l.Throttled)
		}
		return w.Flush()
	case "delete":
		_, raw, err := a.client().do(ctx, "DELETE", base+"/"+url.PathEscape(pos[1]), nil, nil)
		if err != nil || a.opts.json {
			return jsonOr(a, raw, err)
		}
		fmt.Fprintf(a.env.stdout, "deleted limit %s of %s; the jobs it held back are queued again\n", pos[1], pos[0])
		return nil
	}
	doc := map[string]any{}
	var bad error
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "types":
			doc["types"] = strings.Split(*types, ",")
		case "key":
			doc["key"] = *key
		case "concurrency":
			doc["concurrency"] = *conc
		case "rate":
			n, per, ok := strings.Cut(*rate, "/")
			d, err := time.ParseDuration(per)
			limit, err2 := strconv.Atoi(n)
			if !ok || err != nil || err2 != nil || d%time.Second != 0 {
				bad = usagef("--rate wants N/PERIOD with a whole number of seconds, e.g. 100/1m, not %q", *rate)
				return
			}
			doc["rate"] = map[string]any{"limit": limit, "period_seconds": json.Number(strconv.FormatInt(int64(d/time.Second), 10))}
		}
	})
	if bad != nil {
		return bad
	}
	var l limitView
	status, raw, err := a.client().do(ctx, "PUT", base+"/"+url.PathEscape(pos[1]), doc, &l)
	if err != nil || a.opts.json {
		return jsonOr(a, raw, err)
	}
	verb := "replaced"
	if status == 201 {
		verb = "created"
	}
	fmt.Fprintf(a.env.stdout, "%s limit %s of %s: %d active, %d held back\n", verb, l.Name, pos[0], l.Active, l.Throttled)
	return nil
}

// rate formats a limit's rate as N/PERIOD.
func (l limitView) rate() string {
	if l.Rate == nil {
		return ""
	}
	return strconv.Itoa(l.Rate.Limit) + "/" + (time.Duration(l.Rate.PeriodSeconds) * time.Second).String()
}

func nonZero(n int) string {
	if n == 0 {
		return ""
	}
	return strconv.Itoa(n)
}
