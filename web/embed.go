// Package web holds the dashboard: a React app (web/src) that Vite builds
// into web/dist/app, embedded here so that the API binary serves it with no
// Node at run time.
//
// The build is committed to the repository, so the Go module carries it:
// go build, go install …/services/api@latest and go run serve the
// dashboard, with no npm step. dist/sources.sha256, written by the build,
// lists the sources it was made from with their SHA-256; the tests of this
// package (and npm test) fail when the sources changed since, so a change to
// web/src comes with its build (npm run build or make web, then commit
// web/dist).
package web

import (
	"embed"
	"io/fs"
)

//go:embed all:dist
var dist embed.FS

// Dist returns the built dashboard (index.html and assets/), or nil when
// web/dist/app is missing (deleted from a checkout before building the
// binary); the API then serves a page that says how to build it.
func Dist() fs.FS {
	app, err := fs.Sub(dist, "dist/app")
	if err != nil {
		return nil
	}
	if _, err := fs.Stat(app, "index.html"); err != nil {
		return nil
	}
	return app
}
