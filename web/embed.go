// Package web holds the dashboard: a React app (web/src) that Vite builds
// into web/dist/app, embedded here so that the API binary serves it with no
// Node at run time. Before a build, Dist has no app/ and the API serves a
// page that says how to build it.
package web

import (
	"embed"
	"io/fs"
)

//go:embed all:dist
var dist embed.FS

// Dist returns the built dashboard (index.html and assets/), or nil when
// web/ was not built before the binary (go build without make web).
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
