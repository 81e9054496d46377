package job

import (
	"crypto/rand"
	"sync"
	"time"

	"github.com/oklog/ulid/v2"
)

var (
	idMu      sync.Mutex
	idEntropy = ulid.Monotonic(rand.Reader, 0)
)

// NewID returns a new time-ordered job id (a ULID): ids made later in one
// process sort after earlier ones, and ids from different processes sort by
// their millisecond.
func NewID(now time.Time) string {
	idMu.Lock()
	defer idMu.Unlock()
	return ulid.MustNew(ulid.Timestamp(now), idEntropy).String()
}
