package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// storageView is GET /v1/storage's answer.
type storageView struct {
	Format       string     `json:"format"`
	WritableAt   *time.Time `json:"writable_at"`
	Reads        []int      `json:"reads"`
	Newest       int        `json:"newest"`
	Writes       int        `json:"writes"`
	Unregistered []string   `json:"unregistered_workers"`
	HeldBackBy   []string   `json:"held_back_by"`
	Readers      []struct {
		ID        string    `json:"id"`
		Role      string    `json:"role"`
		Hostname  string    `json:"hostname"`
		PID       int       `json:"pid"`
		Reads     []int     `json:"reads"`
		Writes    int       `json:"writes"`
		StartedAt time.Time `json:"started_at"`
		ExpiresAt time.Time `json:"expires_at"`
	} `json:"readers"`
}

// formats lists formats as "1, 2".
func formats(fs []int) string {
	s := make([]string, len(fs))
	for i, f := range fs {
		s[i] = strconv.Itoa(f)
	}
	return strings.Join(s, ", ")
}

// runStorage handles "sundial storage": the storage format the Redis holds
// and the processes registered as its readers.
func runStorage(ctx context.Context, a *app, args []string) error {
	fs := a.flags("storage")
	pos, err := parse(fs, args, false)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("storage takes no arguments")
	}
	var st storageView
	_, raw, err := a.client().do(ctx, "GET", "/v1/storage", nil, &st)
	if err != nil || a.opts.json {
		return jsonOr(a, raw, err)
	}
	fmt.Fprintf(a.env.stdout, "storage format %s (this API reads %s, writes %d)\n\n", st.Format, formats(st.Reads), st.Writes)
	w := newTable(a.env.stdout)
	row(w, "ROLE", "HOST", "PID", "READS", "WRITES", "STARTED", "ID")
	for _, r := range st.Readers {
		row(w, r.Role, r.Hostname, r.PID, formats(r.Reads), r.Writes, showTime(&r.StartedAt), r.ID)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if len(st.Unregistered) > 0 {
		fmt.Fprintf(a.env.stdout, "\nworkers not registered (a release from before the storage format): %s\n", strings.Join(st.Unregistered, ", "))
	}
	switch {
	case len(st.HeldBackBy) > 0 && st.Format != strconv.Itoa(st.Newest):
		fmt.Fprintf(a.env.stdout, "\nformat %d is written once no process lacks it; these read older formats only: %s\n", st.Newest, strings.Join(st.HeldBackBy, ", "))
	case st.WritableAt != nil && st.Format == strconv.Itoa(st.Newest) && st.Writes < st.Newest:
		fmt.Fprintf(a.env.stdout, "\nformat %s is written from %s (30 s after the switch)\n", st.Format, showTime(st.WritableAt))
	}
	return nil
}
