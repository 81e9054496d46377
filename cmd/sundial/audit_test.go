package main

import (
	"strings"
	"testing"

	"github.com/sundialhq/sundial/internal/mongotest"
	"github.com/sundialhq/sundial/pkg/audit"
	"github.com/sundialhq/sundial/pkg/httpapi"
)

// TestAuditCommand: sundial audit shows who paused a queue, filters by
// action and pages; a key without admin is refused, and that refusal is
// itself in the log.
func TestAuditCommand(t *testing.T) {
	_, db := mongotest.Client(t)
	store := audit.NewStore(db, audit.StoreOptions{})
	s := startServerWith(t, httpapi.Config{APIKeys: []string{"ops-key", "prod-key:submit"}, Audit: store, AuditLog: store})
	ops := "SUNDIAL_API_KEY=ops-key"
	s.cli(t, "", args("queues pause mail"), ops).want(t, exitOK)
	s.cli(t, "", args("queues resume mail"), ops).want(t, exitOK)
	s.cli(t, "", args("audit"), "SUNDIAL_API_KEY=prod-key").want(t, exitError, "permission_denied")

	id := audit.KeyID("ops-key")
	r := s.cli(t, "", args("audit --action queue.pause"), ops).want(t, exitOK, "ACTOR", id, "queue.pause", "queue:mail", "ok 200")
	if strings.Contains(r.stdout, "queue.resume") {
		t.Errorf("--action did not filter:\n%s", r.stdout)
	}
	s.cli(t, "", args("audit --actor "+audit.KeyID("prod-key")), ops).want(t, exitOK, "listAudit", "refused 403")
	r = s.cli(t, "", args("audit --limit 1 --since 1h"), ops).want(t, exitOK, "more: --cursor ")
	cursor := strings.TrimSpace(strings.SplitN(r.stdout, "more: --cursor ", 2)[1])
	s.cli(t, "", args("audit --limit 1 --cursor "+cursor), ops).want(t, exitOK, "queue.resume")
	s.cli(t, "", args("audit --json"), ops).want(t, exitOK, `"records"`)
	s.cli(t, "", args("audit extra"), ops).want(t, exitUsage)
	if strings.Contains(r.stdout, "ops-key") {
		t.Error("a key was printed")
	}
}
