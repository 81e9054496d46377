package worker

import (
	"context"
	"testing"

	"github.com/sundialhq/sundial/pkg/queue"
)

// A renewal refused for a job whose handler returned after the renewal
// took its snapshot is the outcome's write ending the lease, not a loss:
// only a job still running is stopped and counted (a drain once logged
// "lease lost" for jobs that had just succeeded).
func TestRefusedRenewalCountsOnlyRunningJobs(t *testing.T) {
	w := &Worker{}
	mk := func(id string) *running {
		_, cancel := context.WithCancelCause(context.Background())
		t.Cleanup(func() { cancel(nil) })
		return &running{queue: "q", lease: queue.Lease{Token: id}, cancel: cancel}
	}
	stillRunning, returned, givenBack, renewed := mk("1"), mk("2"), mk("3"), mk("4")
	returned.returned = true
	givenBack.givenBack = true
	rs := []*running{stillRunning, returned, givenBack, renewed}
	got := w.lost(rs, []bool{false, false, false, true})
	if len(got) != 1 || got[0] != stillRunning {
		t.Fatalf("lost = %v, want only the job still running", got)
	}
	if got := w.lost(rs[:1], []bool{true}); len(got) != 0 {
		t.Fatalf("a renewed lease counted as lost: %v", got)
	}
}
