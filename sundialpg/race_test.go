//go:build race

package sundialpg_test

// manyRows is TestManyProducers' row count: smaller under the race
// detector, which slows PostgreSQL's clients and the relay several times
// (cmd/sundial-outboxbench measures the full 100,000).
const manyRows = 16_000
