// Package audit records who changed what in Sundial: one Record per
// state-changing API action and per refused attempt, with the actor (an API
// key's id or a signed-in user, never a secret), the request id, the action,
// its target, a bulk action's filter and the outcome.
//
// Records go to a Sink: the MongoDB Store (the history store's database,
// collection "audit", kept for a configurable retention), or, when no
// history store is configured, a Log sink that writes each record as a log
// line so that nothing is lost silently.
package audit
