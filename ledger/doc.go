// Package ledger keeps a record of every answered request (who, which
// model, which replica and door, the tokens, the timings and what they
// cost) in a database, for usage reports and, later, budgets.
//
// The request path hands a Record to a Writer, which never blocks it: the
// record goes into a bounded buffer and a background goroutine writes
// batches to a Store (SQLite embedded, or PostgreSQL). While the store is
// down records wait in the buffer; when the buffer is full new records are
// dropped and counted, so that a broken database slows no request.
//
// The package is plain Go: the Caddy glue (modules/llmapp) builds the
// store and the writer from the configuration, and the gateway calls
// Writer.Add once per finished request.
package ledger
