package service

import (
	"runtime/debug"
	"testing"

	"github.com/sundialhq/sundial/pkg/config"
	"github.com/sundialhq/sundial/pkg/queue"
)

// The services collect garbage at DefaultGCPercent unless GOGC says
// otherwise, which then stays as Go set it.
func TestTuneGC(t *testing.T) {
	before := debug.SetGCPercent(100)
	defer debug.SetGCPercent(before)

	if got := tuneGC(func(string) (string, bool) { return "", false }); got != "200" {
		t.Fatalf("tuneGC without GOGC = %q, want 200", got)
	}
	if p := debug.SetGCPercent(100); p != DefaultGCPercent {
		t.Fatalf("GC percent without GOGC = %d, want %d", p, DefaultGCPercent)
	}
	if got := tuneGC(func(k string) (string, bool) { return "50", k == "GOGC" }); got != "50" {
		t.Fatalf("tuneGC with GOGC=50 = %q", got)
	}
	if p := debug.SetGCPercent(100); p != 100 {
		t.Fatalf("GC percent with GOGC set = %d, want it left as it was (100)", p)
	}
}

// SUNDIAL_REDIS_WAIT_REPLICAS=auto reaches the engine as its auto value.
func TestWaitReplicasAutoIsTheEngines(t *testing.T) {
	if config.WaitReplicasAuto != queue.WaitReplicasAuto {
		t.Fatalf("config.WaitReplicasAuto %d, queue.WaitReplicasAuto %d", config.WaitReplicasAuto, queue.WaitReplicasAuto)
	}
}
