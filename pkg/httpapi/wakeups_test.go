package httpapi

import (
	"log/slog"
	"testing"
)

// woken returns how many of chs hold a wake-up, taking them.
func woken(chs []chan struct{}) int {
	n := 0
	for _, ch := range chs {
		select {
		case <-ch:
			n++
		default:
		}
	}
	return n
}

// A signal wakes one waiter, not the whole room; a waiter that leaves
// with a wake-up it did not act on, or after a full claim, passes one on;
// while a waiter of the queue takes only some types, a signal wakes all.
func TestWakeupsWakeOneWaiterPerSignal(t *testing.T) {
	w := newWakeups(nil, slog.Default()) // no start: no watcher runs
	chs := make([]chan struct{}, 10)
	leaves := make([]func(bool), 10)
	for i := range chs {
		chs[i], leaves[i] = w.subscribe([]string{"q"}, false)
	}
	w.notify("q")
	if n := woken(chs); n != 1 {
		t.Fatalf("one signal woke %d waiters, want 1", n)
	}
	for range 3 {
		w.notify("q")
	}
	if n := woken(chs); n != 3 {
		t.Fatalf("three signals woke %d waiters, want 3", n)
	}

	// Waiter 0 leaves holding a wake-up it did not act on: another gets it.
	w.notify("q")
	holder := -1
	for i, ch := range chs {
		if len(ch) == 1 {
			holder = i
		}
	}
	leaves[holder](false)
	rest := append(append([]chan struct{}{}, chs[:holder]...), chs[holder+1:]...)
	leaves = append(leaves[:holder:holder], leaves[holder+1:]...)
	if n := woken(rest); n != 1 {
		t.Fatalf("the wake-up left behind reached %d waiters, want 1", n)
	}
	// A waiter whose claim was full passes one on; one whose claim was
	// not, and who holds none, does not.
	leaves[0](true)
	leaves[1](false)
	rest = rest[2:]
	leaves = leaves[2:]
	if n := woken(rest); n != 1 {
		t.Fatalf("after a full claim %d waiters were woken, want 1", n)
	}

	// A waiter of some types only: every signal wakes every waiter.
	typed, leaveTyped := w.subscribe([]string{"q"}, true)
	w.notify("q")
	if n := woken(append(rest, typed)); n != len(rest)+1 {
		t.Fatalf("with a typed waiter a signal woke %d of %d", n, len(rest)+1)
	}
	leaveTyped(false)
	w.notify("q")
	if n := woken(rest); n != 1 {
		t.Fatalf("after the typed waiter left a signal woke %d, want 1", n)
	}
	for _, l := range leaves {
		l(false)
	}
	if r := w.rooms["q"]; r == nil || len(r.subs) != 0 || r.typed != 0 {
		t.Fatalf("room after every waiter left: %+v", r)
	}
}
