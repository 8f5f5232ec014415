// Package node is one Redis master behind one go-redis client: the queue
// of its requests and the leader goroutine that sends them, pipelining
// the requests that queue while it is busy (pipeline.go); the leader's
// own connection (leaderconn.go) and the slots that bound how many a
// shared pool lends (connslots.go); the node's identity, read on first
// contact (exec.go); the restart guard (guard.go); the execution and
// classification of a request (exec.go) and of an extension batch
// (batch.go); replica sync, WAIT after each write of a lock's state
// (replicas.go); the background retries of failed releases (retry.go);
// and the health probe (probe.go), which reads a node beside its queue.
//
// The root package (the API) reaches a Node by direct calls; a Node
// reports each reply to the root's round through Round, and reaches the
// Client through Host (its goroutine group, Close, the duplicate-node
// check, a log line), which it calls off the request path.
//
// # go-redis assumptions
//
// Everything below was checked against go-redis v9.23.0 (the root
// go.mod). A go-redis upgrade starts by checking each of them.
//
//   - (*redis.Client).WithTimeout returns a new *redis.Client on the same
//     pools, with a copy of the Options, whose dials run the parent's
//     hooks, never the clone's. The connection slots are therefore keyed
//     by address, database, user and pool size, not by client
//     (connslots.go), and the restart guard refuses a client whose hooks
//     do not see its own dials (guard.go, seesDials).
//   - A dial hook (redis.Hook.DialHook) runs for every connection a
//     client's pools establish, before the connection is used; the
//     pub/sub pool dials through the hooks of the client that made it,
//     like the main pool. The restart guard's argument rests on this.
//   - A request over MaxActiveConns fails at once with
//     ErrPoolExhausted, where one over PoolSize waits up to PoolTimeout:
//     MaxActiveConns is a hard cap, and a leader holds no connection of
//     a client whose MaxActiveConns is below its PoolSize (ownConnFits).
//   - Clients of NewFailoverClient report the placeholder address
//     "FailoverClient" (FailoverAddr): not an address, so neither a
//     duplicate check by address nor a connection of the leader's own.
//   - (*redis.Client).Watch with no key sends no WATCH, holds one pool
//     connection for its callback, and gives it back (or discards it,
//     if broken) when the callback returns. The Tx it passes has its own
//     copy of the client's Options, taken under the client's lock, and
//     the client's hooks as they were when it was made. A redis.Conn, by
//     contrast, shares the client's *Options, which go-redis may write
//     (with RESP3, switching maintenance notifications off on a server
//     that refuses them): a data race with the pool (leaderconn.go).
//   - The pool's health check on checkout costs a syscall and three
//     allocations; a connection closed while idle shows as io.EOF,
//     io.ErrUnexpectedEOF, ECONNRESET or EPIPE on its next request
//     (closedUnder).
//   - go-redis skips its check for RESP3 push notifications before and
//     after each command only on a connection put back in the pool less
//     than 5s ago; a connection held longer pays that check on every
//     request (leaderConnAge).
//   - Without ContextTimeoutEnabled, go-redis may not honour a context
//     deadline: every wait on a node is bounded here (WaitTimeout, the
//     round's timer).
//   - A pool whose dials failed PoolSize times in a row fails every
//     later dial at once with the last dial error, until a background
//     dial, tried once a second, gets through: a node that restarted
//     stays unreachable to the client for up to about a second after it
//     answers again ("connection refused" from the time it was down).
//     Nothing here depends on it; the stress test waits it out before
//     it expects every node to answer.
//   - go-redis may panic on a malformed reply; every call into it that
//     parses one recovers, and the panic is a node failure.
//   - SET NX refused answers redis.Nil; a pipeline that fails as a whole
//     (a dial, AUTH) leaves its commands' results nil, with the error on
//     Exec (contact).
//   - A pipeline's commands go out on one connection, for a Client's
//     Pipeline as for a Tx's, and its replies are read within the
//     client's ReadTimeout whatever a command's own timeout (go-redis's
//     Wait sets one that pipelines ignore): WAIT after a write in one
//     pipeline covers that write, and its timeout must stay below
//     ReadTimeout (replicas.go).
//   - A server error is a redis.Error (redis.HasErrorPrefix matches
//     NOSCRIPT and WRONGTYPE on it); redis.ErrClosed is the error of a
//     closed client, on which nothing more can be sent (retry.go).
//
// # Server assumptions
//
// Checked against Redis 7.0.15 and Valkey 8.0.1 (`make test` runs a
// subset of the tests on each; see internal/redisnode's REDLOCK_SERVER):
//
//   - INFO server has run_id and uptime_in_seconds on both (the identity
//     and the restart guard read them). Valkey also reports
//     redis_version, as 7.2.4, the Redis it forked from; its own name and
//     version are server_name and valkey_version (ServerVersion). Redis's
//     redis_mode is server_mode on Valkey.
//   - An EVALSHA of a script the node lacks fails with the prefix
//     NOSCRIPT on both; the text after it differs, and only the prefix is
//     matched (wire.IsNoScript).
//   - A command an ACL denies fails with NOPERM on both; one a script
//     runs fails with an ERR worded differently by each (wire.IsACLDenied).
package node
