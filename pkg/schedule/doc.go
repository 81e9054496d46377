// Package schedule implements recurring schedules: it validates a schedule's
// timing (a cron expression or a fixed interval, a time zone, a misfire policy)
// and answers when it fires next, through DST changes and after downtime.
// The time math is pure, with no I/O, so that the poller firing schedules and
// the HTTP API showing their upcoming runs compute the same times.
//
// Around the math: a Store keeps schedules in Redis and tells running
// schedulers about every change; a Scheduler (one per poller) takes part in
// a leader election and, while leading, fires due schedules. Each fire is a
// compare-and-set of the schedule's next run in the same script as the
// submit of its job, so a fire time is never fired twice, whatever the lock
// says. docs/schedules.md describes the design.
package schedule
