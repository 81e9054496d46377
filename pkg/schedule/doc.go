// Package schedule implements recurring schedules: it validates a schedule's
// timing (a cron expression or a fixed interval, a time zone, a misfire policy)
// and answers when it fires next, through DST changes and after downtime.
// The time math is pure, with no I/O, so that the poller firing schedules and
// the HTTP API showing their upcoming runs compute the same times.
package schedule
