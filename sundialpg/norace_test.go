//go:build !race

package sundialpg_test

// manyRows is TestManyProducers' row count (see race_test.go).
const manyRows = 100_000
