package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
	"time"
)

// timeLayout is how times are shown in tables: the API's zone offset kept
// (a schedule's times are in its time zone), second precision.
const timeLayout = "2006-01-02 15:04:05 -07:00"

// apiTimeLayout is the API's own time format (RFC 3339, milliseconds, UTC),
// used where lines are meant for tools as much as for people (watch).
const apiTimeLayout = "2006-01-02T15:04:05.000Z07:00"

// printJSON writes raw JSON indented, as the API sent it.
func printJSON(w io.Writer, raw []byte) error {
	var b bytes.Buffer
	if err := json.Indent(&b, raw, "", "  "); err != nil {
		_, err = w.Write(raw)
		return err
	}
	b.WriteByte('\n')
	_, err := w.Write(b.Bytes())
	return err
}

// newTable returns a tabwriter for aligned columns.
func newTable(w io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
}

// row writes one tab-separated row.
func row(w io.Writer, cols ...any) {
	for i, c := range cols {
		if i > 0 {
			fmt.Fprint(w, "\t")
		}
		fmt.Fprint(w, c)
	}
	fmt.Fprintln(w)
}

// showTime formats an optional time; "-" when absent.
func showTime(t *time.Time) string {
	if t == nil || t.IsZero() {
		return "-"
	}
	return t.Format(timeLayout)
}

// relative says how far t is from now: "in 4m12s", "3s ago".
func relative(t *time.Time, now time.Time) string {
	if t == nil || t.IsZero() {
		return "-"
	}
	d := t.Sub(now).Round(time.Second)
	switch {
	case d > 0:
		return "in " + d.String()
	case d < 0:
		return (-d).String() + " ago"
	}
	return "now"
}

// orDash returns s, or "-" when empty.
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
