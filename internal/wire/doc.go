// Package wire is what a node is sent and what it answers, with no I/O:
// the Lua scripts (scripts/<kind>/*.lua, one //go:embed), the building of
// requests (SET NX PX for an unfenced acquire of one key, EVALSHA with an
// EVAL fallback for the rest, the extension batches), and the parsing of
// replies into a node status. It imports go-redis for its types and
// error helpers only.
package wire
