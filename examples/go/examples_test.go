// Package examples runs the Go example programs of this directory against
// a private redis-server (and, for outbox, a PostgreSQL database of
// internal/mongotest), so that they keep working as the API changes.
package examples

import (
	"context"
	"os/exec"
	"regexp"
	"testing"
	"time"

	"github.com/sundialhq/sundial/internal/mongotest"
	"github.com/sundialhq/sundial/pkg/queue/queuetest"
)

// TestMain stops the PostgreSQL the outbox example uses (mongotest).
func TestMain(m *testing.M) { mongotest.Main(m) }

func TestPrograms(t *testing.T) {
	for _, tc := range []struct {
		dir  string
		args []string
		want []string // regular expressions the output must match
	}{
		{"emails", nil, []string{
			`(?m)^ada@example\.com\s+sent \(attempt \d+\)$`,
			`(?m)^grace@example\.com\s+sent`,
			`(?m)^edsger@invalid\.example\s+dead: 550 mailbox unavailable$`,
		}},
		{"pipeline", nil, []string{
			`(?m)^submitted \S+: queued$`,
			`(?m)^submitted \S+: waiting$`,
			`(?m)^report succeeded \{"output":"report\.parquet"\}$`,
			`(?m)^ran: export → (clean \+ enrich|enrich \+ clean) → report$`,
		}},
		{"outbox", []string{"-postgres"}, []string{
			`(?m)^ada@example\.com\s+order \d+: email job \w{26} succeeded \{"sent_to":"ada@example\.com"\}$`,
			`(?m)^grace@example\.com\s+rolled back: out of stock; job \w{26} never runs$`,
			`(?m)^edsger@example\.com\s+order \d+: email job \w{26} succeeded`,
			`(?m)^outbox rows left: 0$`,
		}},
		{"nightly", []string{"-now"}, []string{
			`(?m)^  \w{3} \d{4}-\d\d-\d\d 03:00 CES?T$`,
			`(?m)^triggered run: succeeded \{"report":"sales-\d{4}-\d\d-\d\d\.pdf"\}$`,
		}},
	} {
		t.Run(tc.dir, func(t *testing.T) {
			t.Parallel()
			srv := queuetest.Start(t)
			if tc.dir == "outbox" {
				tc.args = append(tc.args, mongotest.PostgresURL(t))
			}
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, "go", append([]string{"run", "./" + tc.dir, "-redis", srv.Addr()}, tc.args...)...)
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("go run ./%s: %v\n%s", tc.dir, err, out)
			}
			for _, w := range tc.want {
				if !regexp.MustCompile(w).Match(out) {
					t.Errorf("output lacks %s:\n%s", w, out)
				}
			}
		})
	}
}
