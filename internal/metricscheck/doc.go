// Package metricscheck keeps the Grafana dashboards (deploy/grafana) and the
// Prometheus alert rules (deploy/prometheus/sundial-rules.yaml) true to what
// the binaries export: every metric name their queries use must be a series
// the real API, worker and poller serve on /metrics once a few jobs ran. It
// also checks the dashboards' structure (data sources, queries, grid, ids),
// parses every dashboard query with promtool, and checks that each alert's
// runbook_url points at a heading of docs/operations.md. Test-only.
package metricscheck
