// Package chaos is the chaos suite of redlock: it kills, pauses,
// restarts, slows, partitions and skews real Redis nodes mid-lock while
// clients contend for locks, records every critical section on one
// monotonic clock, and checks that no two holders overlap and that the
// fenced resource never accepts a stale write. It is importable, so that
// teams can run it against their own set-ups (Suite, Backend), and it is
// what `redlock-lab chaos` runs (Command).
//
// # Nodes
//
// A Backend starts the nodes. Local, the default, runs redis-server
// processes on loopback (internal/redisnode): every process is killed
// when the run ends, also on failure, and by the kernel if the run dies.
// Docker runs redis:7 containers through github.com/ory/dockertest/v3
// where a Docker engine answers (NewDocker pings it).
//
// # Faults
//
// The Cluster's methods inject each fault at any moment, mid-lock
// included, and record it as an Event:
//
//   - Kill: kill -9. Restart: at once, memory lost (or, with
//     ClusterOptions.AppendOnly and appendfsync always, data kept).
//     RestartAfter: kill, stay down for a delay, restart (the Redlock
//     spec's delayed restart).
//   - Pause and Resume: SIGSTOP and SIGCONT.
//   - Slow and Partition (and Heal): per node, through a proxy.
//     github.com/Shopify/toxiproxy/v2 is embedded as a library, with no
//     HTTP API server: each node gets a toxiproxy.Proxy and the clients
//     dial it. Slow adds a latency toxic to the replies; Partition adds
//     timeout toxics (timeout 0) both ways, which drop every byte on open
//     and new connections alike, so clients see timeouts, not refusals.
//   - Skew: a node whose TTLs run faster than real time. libfaketime
//     crashes Debian's redis-server (jemalloc), so the skew is injected
//     from the client side: every go-redis client made for the node
//     carries the node's SkewHook, which divides the millisecond TTL of
//     the lock's acquire and extend scripts (ARGV[2]) and of SET PX and
//     PEXPIRE by the node's clock rate. Keys then expire on that node as
//     they would if its clock ran that much faster.
//
// # workload and history
//
// K clients (goroutines, each with its own go-redis and redlock clients)
// contend for one or several keys with WithFencing. Each critical
// section is a Section (client, token, fence, attempt, acquired,
// released, validity deadline), each TryLock an Attempt, each write to
// the protected Resource a Write: redlock.FencedSet on a storage node no
// fault touches.
//
// # Checker
//
// Check is pure: a violation is two holders that exclude each other
// whose safe windows [acquired, min(released, deadline)] overlap (two
// writers of one key, a writer and a reader of it, two folder locks on
// related paths: see Mode), more permits of a semaphore at once than its
// limit, or a fenced write accepted with a token not larger than one
// accepted before it. It is unit-tested on hand-made histories,
// including ones that must fail.
//
// # Scenarios
//
// Scenarios lists them; each expects "safe", "violations" (where
// Redlock's assumptions are broken on purpose: restart-no-guard,
// skew-beyond) or "unavailable". Faults that must produce a violation
// are orchestrated (see scenarios_crash.go and skew), so that the
// violation is found every run, not by luck.
//
// go test ./... in the chaos module runs the short suite and asserts every
// expectation; -chaos.long (or CHAOS_LONG=1) runs the long one.
package chaos
