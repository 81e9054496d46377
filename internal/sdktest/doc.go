// Package sdktest runs the test suites of the SDKs in sdk/ (Python's
// unittest, the TypeScript package's node --test) against the real API
// binary, a poller and a private redis-server. The tests carry the build
// tag sdktest so that go test ./... does not run them a second time:
// make test-sdk runs them (go test -tags sdktest ./internal/sdktest).
package sdktest
