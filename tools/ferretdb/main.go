// Command ferretdb runs FerretDB v1 (a MongoDB wire-protocol server) embedded, on a
// PostgreSQL backend. It is the local and test stand-in for MongoDB: this machine class has
// no MongoDB server package and no Docker engine (see docs/mongo-standin.md).
//
// It lives in its own module so FerretDB's large dependency tree stays out of the root
// module. Build it with the SQLite backend compiled out (it is never used, and it is most
// of the build time):
//
//	go build -tags ferretdb_no_sqlite -o ../../.local/bin/ferretdb .
//
// scripts/mongo-standin.sh and internal/mongotest do exactly that.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	"github.com/FerretDB/FerretDB/build/version"
	"github.com/FerretDB/FerretDB/ferretdb"
)

func main() {
	os.Exit(run())
}

func run() int {
	listen := flag.String("listen", envOr("FERRETDB_LISTEN_ADDR", "127.0.0.1:27017"),
		"TCP address to listen on (env FERRETDB_LISTEN_ADDR)")
	pgURL := flag.String("postgresql-url", envOr("FERRETDB_POSTGRESQL_URL", ""),
		"PostgreSQL connection URL, e.g. postgres://postgres@127.0.0.1:5432/ferretdb (env FERRETDB_POSTGRESQL_URL)")
	logLevel := flag.String("log-level", envOr("FERRETDB_LOG_LEVEL", "warn"),
		"log level: debug, info, warn or error (env FERRETDB_LOG_LEVEL)")
	flag.Parse()

	if *pgURL == "" {
		fmt.Fprintln(os.Stderr, "ferretdb: -postgresql-url (or FERRETDB_POSTGRESQL_URL) is required")
		return 2
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		fmt.Fprintf(os.Stderr, "ferretdb: bad -log-level %q: %v\n", *logLevel, err)
		return 2
	}
	// Embedded builds report ferretdbVersion "unknown" in buildInfo; report the module
	// version instead so that logs and detection code see something meaningful.
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, dep := range bi.Deps {
			if dep.Path == "github.com/FerretDB/FerretDB" {
				version.Get().Version = dep.Version
			}
		}
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))

	f, err := ferretdb.New(&ferretdb.Config{
		Listener:      ferretdb.ListenerConfig{TCP: *listen},
		Logger:        logger,
		Handler:       "postgresql", // never "sqlite": far too slow for updates
		PostgreSQLURL: *pgURL,
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "ferretdb: %v\n", err)
		return 1
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	fmt.Fprintf(os.Stderr, "ferretdb: serving MongoDB wire protocol on %s (postgresql backend), pid %d\n", *listen, os.Getpid())
	if err := f.Run(ctx); err != nil {
		fmt.Fprintf(os.Stderr, "ferretdb: %v\n", err)
		return 1
	}
	return 0
}

func envOr(key, def string) string {
	if v, ok := os.LookupEnv(key); ok && v != "" {
		return v
	}
	return def
}
