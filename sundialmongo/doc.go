// Package sundialmongo submits Sundial jobs inside a MongoDB transaction:
// SubmitTx writes them into an outbox collection with the caller's own
// documents, so an aborted transaction never makes a job and a committed
// one makes exactly one. A Relay (run by services/poller when
// SUNDIAL_OUTBOX_MONGO_URI is set, or by a program of one's own) moves
// committed documents into Redis.
//
// It needs a MongoDB that has transactions: a replica set or a sharded
// cluster. FerretDB v1 (the test stand-in) and a standalone mongod have
// none; CheckTransactions says so, and the poller refuses to start on them.
// See docs/outbox.md.
package sundialmongo
