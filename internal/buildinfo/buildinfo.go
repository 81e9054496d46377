// Package buildinfo holds the release's version, the one place it is set:
// every binary prints it (--version, its startup log line), exports it
// (sundial_build_info) and the API answers it (GET /v1/version). A build
// may override it with
//
//	go build -ldflags "-X github.com/sundialhq/sundial/internal/buildinfo.Version=0.1.0-dev+abc123"
//
// A test keeps it equal to CHANGELOG.md's newest released section.
package buildinfo

import (
	"fmt"
	"runtime"

	"github.com/prometheus/client_golang/prometheus"
)

// Version is the release's semantic version.
var Version = "0.2.0"

// String is how a binary introduces itself: "sundial-<name> <version>
// (<go version>)".
func String(name string) string {
	return fmt.Sprintf("sundial-%s %s (%s)", name, Version, runtime.Version())
}

// Collector returns the sundial_build_info gauge, always 1, labelled with
// the version and the Go version: join it to other series to see which
// release each process runs.
func Collector() prometheus.Collector {
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "sundial_build_info",
		Help: "Always 1; its labels say which Sundial release (version) and Go version (goversion) the process runs.",
	}, []string{"version", "goversion"})
	g.WithLabelValues(Version, runtime.Version()).Set(1)
	return g
}

// IsVersionFlag tells whether args ask for the version (--version or
// -version as the only argument).
func IsVersionFlag(args []string) bool {
	return len(args) == 1 && (args[0] == "--version" || args[0] == "-version")
}
