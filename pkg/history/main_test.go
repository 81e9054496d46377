package history

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sundialhq/sundial/internal/mongotest"
	"github.com/sundialhq/sundial/pkg/queue"
	"go.uber.org/goleak"
)

// childEnv, when set, makes the test binary run a history writer instead
// of the tests (see startChildWriter): the kill -9 test needs a writer in
// another process.
const childEnv = "SUNDIAL_HISTORY_TEST_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(runChildWriter())
	}
	code := mongotest.Run(m)
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// runChildWriter runs a Writer configured from the environment until
// SIGTERM (or SIGKILL, which is the point).
func runChildWriter() int {
	get := func(k string) string { return os.Getenv(childEnv + "_" + k) }
	batch, _ := strconv.Atoi(get("BATCH"))
	ttl, _ := time.ParseDuration(get("OWNER_TTL"))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	rdb := redis.NewClient(&redis.Options{Addr: get("REDIS")})
	defer rdb.Close()
	client, err := Connect(get("MONGO"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer client.Disconnect(context.WithoutCancel(ctx))
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	store := NewStore(client.Database(get("DB")), StoreOptions{Logger: log})
	w := NewWriter(queue.New(rdb, queue.Options{}), store, WriterConfig{
		Consumer: get("CONSUMER"), BatchSize: batch, OwnerTTL: ttl, Logger: log,
		DiscoverInterval: 100 * time.Millisecond,
	})
	if err := w.Run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}
