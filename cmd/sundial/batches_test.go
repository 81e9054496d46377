package main

import (
	"testing"
)

// TestBatches: a batch from stdin is submitted and shown; get, cancel and
// retry act on it; an unknown batch and bad input are errors.
func TestBatches(t *testing.T) {
	s := startServer(t)
	doc := `{"jobs": [{"type": "row", "queue": "imp"}, {"type": "row", "queue": "imp2"}],
		"on_complete": {"type": "report", "queue": "rep"}}`
	s.cli(t, doc, args("batches submit -f - --id import-7")).
		want(t, exitOK, "submitted batch import-7: 2 jobs", "Total:", "2", "pending 2", "On complete:", "pending")
	s.cli(t, "", args("batches get import-7")).want(t, exitOK, "import-7", "Sealed:", "true")
	s.cli(t, "", args("batches cancel import-7")).want(t, exitOK, "cancelled 2 jobs of batch import-7")
	s.cli(t, "", args("batches retry import-7")).want(t, exitOK, "retried 2 jobs of batch import-7")
	s.cli(t, "", args("batches get import-7 --json")).want(t, exitOK, `"total": 2`)
	s.cli(t, doc, args("batches submit -f - --id import-7")).want(t, exitError, "exists")
	s.cli(t, "", args("batches get nope")).want(t, exitNotFound, "batch not found")
	s.cli(t, `{"jobs": [{"type": "row", "depends_on": ["x"]}]}`, args("batches submit -f -")).want(t, exitError, "jobs[0].depends_on")
	s.cli(t, "", args("batches submit")).want(t, exitUsage, "-f FILE")
	s.cli(t, "", args("batches")).want(t, exitUsage, "submit")
	s.cli(t, "", args("batches get")).want(t, exitUsage, "one argument")
}
