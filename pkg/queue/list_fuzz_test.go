package queue

import (
	"errors"
	"testing"

	"github.com/sundialhq/sundial/pkg/job"
)

// FuzzListCursor: any string given as a cursor decodes to a cursor of the
// state asked for, with sane fields, or is refused as ErrInvalidCursor;
// a decoded cursor encodes back to one that decodes the same.
func FuzzListCursor(f *testing.F) {
	for _, lc := range []listCursor{
		{State: "queued", Seg: 1, Off: 120, GOff: 3},
		{State: "queued", Seg: 3, Slot: "l|k", Score: 1e13, ID: "01JD3X"},
		{State: "dead", Score: 1764300000000, ID: "01JD3X"},
	} {
		f.Add(lc.encode(), lc.State)
	}
	f.Add("nonsense", "queued")
	f.Fuzz(func(t *testing.T, s, state string) {
		lc, err := decodeListCursor(s, job.State(state))
		if err != nil {
			if !errors.Is(err, ErrInvalidCursor) {
				t.Fatalf("%q: %v, want ErrInvalidCursor", s, err)
			}
			return
		}
		if lc.State != state || lc.Seg < 0 || lc.Seg > 3 || lc.Off < 0 || lc.GOff < 0 || (lc.ID != "" && !validID(lc.ID)) {
			t.Fatalf("%q decoded to %+v", s, lc)
		}
		again, err := decodeListCursor(lc.encode(), job.State(state))
		if err != nil || again != lc {
			t.Fatalf("%+v: re-encoded decodes to %+v, %v", lc, again, err)
		}
	})
}
