// Package docscheck holds the tests that keep the documentation true to the
// code: every environment variable, HTTP route, CLI command and repository
// path that README.md and docs/*.md name exists (and every variable, route
// and command is documented), and the README's Go program runs. It has no
// code of its own; `go test ./internal/docscheck` is the check, and make
// test runs it with everything else.
package docscheck
