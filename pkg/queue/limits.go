package queue

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/sundialhq/sundial/pkg/job"
)

// Bounds of a Limit (docs/flow-control.md).
const (
	MaxLimitConcurrency = 10000 // jobs of one slot active at once
	MaxRateLimit        = 10000 // starts of one slot per period
	MaxRatePeriod       = 86400 // seconds
	MaxLimitTypes       = 100
	MaxLimitsPerQueue   = 100
)

var (
	limitNameRe = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)
	limitKeyRe  = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)
)

// ErrLimitNotFound: the queue has no limit of that name.
var ErrLimitNotFound = errors.New("limit not found")

// ErrTooManyLimits: a queue holds at most MaxLimitsPerQueue limits.
var ErrTooManyLimits = fmt.Errorf("a queue holds at most %d limits", MaxLimitsPerQueue)

// Limit caps the jobs of one queue it covers: at most Concurrency of them
// active at once, and at most Rate.Limit started within any window of
// Rate.PeriodSeconds. Types names the job types it covers (none: every
// type of the queue). With Key, each value of that top-level payload field
// (a customer id) has its own caps: a slot. A job that a limit has no room
// for waits queued, held back, and keeps its place in priority order; the
// claim that would start it never does (docs/flow-control.md).
type Limit struct {
	Name        string   `json:"name"`
	Types       []string `json:"types,omitempty"`
	Key         string   `json:"key,omitempty"`
	Concurrency int      `json:"concurrency,omitempty"`
	Rate        *Rate    `json:"rate,omitempty"`
}

// Rate is a limit's cap on starts: Limit per any window of PeriodSeconds.
type Rate struct {
	Limit         int `json:"limit"`
	PeriodSeconds int `json:"period_seconds"`
}

// LimitStatus is a limit with what it holds now.
type LimitStatus struct {
	Limit
	// Active counts the running jobs that hold a concurrency slot of it.
	Active int64 `json:"active"`
	// Throttled counts the queued jobs it holds back.
	Throttled int64 `json:"throttled"`
}

// Validate checks l; the error is a *job.FieldError naming the field.
func (l *Limit) Validate() error {
	bad := func(field, format string, args ...any) error {
		return &job.FieldError{Field: field, Message: field + " " + fmt.Sprintf(format, args...)}
	}
	if !limitNameRe.MatchString(l.Name) {
		return bad("name", "must match [A-Za-z0-9_.-]{1,64}")
	}
	if len(l.Types) > MaxLimitTypes {
		return bad("types", "may name at most %d types", MaxLimitTypes)
	}
	for i, t := range l.Types {
		if !job.ValidType(t) {
			return bad(fmt.Sprintf("types[%d]", i), "must match [A-Za-z0-9_.:-]{1,128}")
		}
		if slices.Contains(l.Types[:i], t) {
			return bad(fmt.Sprintf("types[%d]", i), "names %q twice", t)
		}
	}
	if l.Key != "" && !limitKeyRe.MatchString(l.Key) {
		return bad("key", "must be a top-level payload field name matching [A-Za-z0-9_-]{1,64}")
	}
	if l.Concurrency < 0 || l.Concurrency > MaxLimitConcurrency {
		return bad("concurrency", "must be between 1 and %d (0 or left out: no concurrency limit)", MaxLimitConcurrency)
	}
	if r := l.Rate; r != nil {
		if r.Limit < 1 || r.Limit > MaxRateLimit {
			return bad("rate.limit", "must be between 1 and %d", MaxRateLimit)
		}
		if r.PeriodSeconds < 1 || r.PeriodSeconds > MaxRatePeriod {
			return bad("rate.period_seconds", "must be between 1 and %d", MaxRatePeriod)
		}
	}
	if l.Concurrency == 0 && l.Rate == nil {
		return bad("concurrency", "or rate is required")
	}
	return nil
}

// encode is the definition's form in the queue's limits hash (see lib.lua).
func (l *Limit) encode() string {
	rate, period := 0, 0
	if l.Rate != nil {
		rate, period = l.Rate.Limit, l.Rate.PeriodSeconds*1000
	}
	return strings.Join(l.Types, ",") + "\t" + l.Key + "\t" + strconv.Itoa(l.Concurrency) + "\t" +
		strconv.Itoa(rate) + "\t" + strconv.Itoa(period)
}

// decodeLimit reads a definition of the limits hash.
func decodeLimit(name, s string) (Limit, bool) {
	f := strings.Split(s, "\t")
	if len(f) != 5 {
		return Limit{}, false
	}
	conc, err1 := strconv.Atoi(f[2])
	rate, err2 := strconv.Atoi(f[3])
	period, err3 := strconv.Atoi(f[4])
	if err1 != nil || err2 != nil || err3 != nil {
		return Limit{}, false
	}
	l := Limit{Name: name, Key: f[1], Concurrency: conc}
	if f[0] != "" {
		l.Types = strings.Split(f[0], ",")
	}
	if rate > 0 {
		l.Rate = &Rate{Limit: rate, PeriodSeconds: period / 1000}
	}
	return l, true
}

// SetLimit creates or replaces limit l.Name of queue, at once and
// cluster-wide: the next claim applies it. A raise lets held-back jobs
// go at once; a change of types or key lets all of them go, to be sorted
// again by the claims that take them. created tells a new limit from a
// replaced one.
func (c *Client) SetLimit(ctx context.Context, queue string, l Limit) (st LimitStatus, created bool, err error) {
	if err := l.Validate(); err != nil {
		return LimitStatus{}, false, err
	}
	if err := c.register(ctx, queue); err != nil {
		return LimitStatus{}, false, err
	}
	if created, err = c.limitOp(ctx, c.keysFor(queue), "set", l.Name, l.encode()); err != nil {
		return LimitStatus{}, false, err
	}
	st, err = c.Limit(ctx, queue, l.Name)
	return st, created, err
}

// DeleteLimit removes limit name of queue; every job it held back goes
// back to its list. ErrLimitNotFound when there is none.
func (c *Client) DeleteLimit(ctx context.Context, queue, name string) error {
	_, err := c.limitOp(ctx, c.keysFor(queue), "del", name, "")
	return err
}

// limitOp runs limit.lua, then 'free' until it has let go every job that
// must go. created tells whether a 'set' made a new limit.
func (c *Client) limitOp(ctx context.Context, k *queueKeys, op, name, def string) (created bool, err error) {
	for {
		res, err := c.run(ctx, c.scripts.limit, k, c.opts.Now(), op, name, def, MaxLimitsPerQueue).StringSlice()
		switch {
		case err != nil:
			return false, fmt.Errorf("limit %s: %w", op, err)
		case res[0] == "not_found":
			return false, ErrLimitNotFound
		case res[0] == "full":
			return false, ErrTooManyLimits
		}
		created = created || res[3] == "1"
		if res[2] == "0" {
			return created, nil
		}
		op = "free"
	}
}

// Limits returns queue's limits, by name, with what each holds now.
func (c *Client) Limits(ctx context.Context, queue string) ([]LimitStatus, error) {
	k := c.keysFor(queue)
	pipe := c.rdb.Pipeline()
	defs := pipe.HGetAll(ctx, k.tag+"limits")
	stat := pipe.HGetAll(ctx, k.tag+"limstat")
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, fmt.Errorf("limits: %w", err)
	}
	return limitStatuses(defs.Val(), stat.Val()), nil
}

// Limit returns limit name of queue with what it holds now;
// ErrLimitNotFound when there is none.
func (c *Client) Limit(ctx context.Context, queue, name string) (LimitStatus, error) {
	all, err := c.Limits(ctx, queue)
	if err != nil {
		return LimitStatus{}, err
	}
	for _, l := range all {
		if l.Name == name {
			return l, nil
		}
	}
	return LimitStatus{}, ErrLimitNotFound
}

// limitStatuses joins the limits hash and the limit counters, by name.
func limitStatuses(defs, stat map[string]string) []LimitStatus {
	out := make([]LimitStatus, 0, len(defs))
	for name, def := range defs {
		l, ok := decodeLimit(name, def)
		if !ok {
			continue
		}
		a, _ := strconv.ParseInt(stat["a:"+name], 10, 64)
		p, _ := strconv.ParseInt(stat["p:"+name], 10, 64)
		out = append(out, LimitStatus{Limit: l, Active: max(a, 0), Throttled: max(p, 0)})
	}
	slices.SortFunc(out, func(a, b LimitStatus) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// throttledTotal sums the jobs every limit of a queue holds back.
func throttledTotal(stat map[string]string) int64 {
	var n int64
	for f, v := range stat {
		if strings.HasPrefix(f, "p:") && f != "p:"+NoHandlerLimit {
			x, _ := strconv.ParseInt(v, 10, 64)
			n += max(x, 0)
		}
	}
	return n
}

// unhandledCount is the queued jobs parked for a handler (NoHandlerLimit),
// from a queue's limit counters.
func unhandledCount(stat map[string]string) int64 {
	n, _ := strconv.ParseInt(stat["p:"+NoHandlerLimit], 10, 64)
	return max(n, 0)
}
