package sundialmongo

// InsertNoTx is SubmitTx without the check for a transaction: FerretDB
// v1, the tests' MongoDB, has none, and the write inside a session is the
// only difference.
var InsertNoTx = insert
