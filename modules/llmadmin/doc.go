// Package llmadmin adds llmedge's routes to Caddy's admin API (signing key
// rotation, API keys, revocation, the status page's data, the Batch API's
// batches) and the `llmedge` subcommands that call them (rotate-keys,
// create-key, list-keys, revoke-key, revoke, batches) or work on files
// (add-user). Every route acts on the running configuration's llmedge app.
package llmadmin
