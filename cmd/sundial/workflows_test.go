package main

import (
	"testing"
)

// TestWorkflowsSubmit: a workflow from stdin is submitted and listed by
// step; again with the same id it stores nothing; a cycle is refused
// naming the step.
func TestWorkflowsSubmit(t *testing.T) {
	s := startServer(t)
	doc := `{"steps": [
		{"name": "load", "job": {"type": "load", "queue": "etl"}, "after": ["extract"]},
		{"name": "extract", "job": {"type": "extract", "queue": "raw"}}
	]}`
	s.cli(t, doc, args("workflows submit -f - --id nightly")).
		want(t, exitOK, "submitted workflow nightly", "STEP", "extract", "raw", "queued", "load", "etl", "waiting")
	s.cli(t, doc, args("workflows submit -f - --id nightly")).want(t, exitOK, "workflow nightly was submitted before")
	s.cli(t, doc, args("workflows submit -f - --json")).want(t, exitOK, `"steps": {`)
	cycle := `{"steps": [{"name": "a", "job": {"type": "t"}, "after": ["a"]}]}`
	s.cli(t, cycle, args("workflows submit -f -")).want(t, exitError, "steps[0].after[0]")
	s.cli(t, "", args("workflows submit")).want(t, exitUsage, "-f FILE")
	s.cli(t, "", args("workflows")).want(t, exitUsage, "submit")
}
