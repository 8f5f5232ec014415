package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seed543a70bd/redlock"
	"github.com/seed543a70bd/redlock/internal/redisnode"
)

// nodeURLs are the examples' Redis masters, one URL each, as a program
// would list its own ("redis://redis1:6379", ...), and storeURL is the
// Redis where ExampleFencedSet keeps its resource. locker is the Client
// of the examples of one method: a program makes its Client once, with
// redlock.Dial(nodeURLs), and closes it before it exits (see Example).
// TestMain fills them with local redis-server processes
// (startExampleNodes).
var (
	nodeURLs []string
	storeURL string
	locker   *redlock.Client
)

// startExampleNodes starts four local redis-server processes for the
// examples and returns the URLs of three lock nodes and of a store, a
// Client dialled on the three, and a func that closes the Client and
// stops the processes.
func startExampleNodes() (nodes []string, store string, shared *redlock.Client, stop func(), err error) {
	started, err := redisnode.StartN(4, redisnode.Options{})
	if err != nil {
		return nil, "", nil, nil, err
	}
	stopNodes := func() {
		for _, nd := range started {
			_ = nd.Close()
		}
	}
	urls := make([]string, len(started))
	for i, nd := range started {
		urls[i] = "redis://" + nd.Addr()
	}
	shared, err = redlock.Dial(urls[:3])
	if err != nil {
		stopNodes()
		return nil, "", nil, nil, err
	}
	return urls[:3], urls[3], shared, func() {
		_ = shared.Close()
		stopNodes()
	}, nil
}

// printErr prints what failed and err, when err is not nil: an example's
// output then shows the failure.
func printErr(what string, err error) {
	if err != nil {
		fmt.Println(what+":", err)
	}
}

// closeAfter closes locker, then the go-redis clients it was made on:
// each c.Close() in turn.
func closeAfter(locker interface{ Close() error }, clients []redis.UniversalClient) {
	_ = locker.Close()
	for _, c := range clients {
		_ = c.Close()
	}
}

// The whole life of a lock: Dial the nodes, wait for the lock, tell why
// it was not had, release it, and Close before the process exits.
func Example() {
	locker, err := redlock.Dial(nodeURLs) // "redis://redis1:6379", ...
	if err != nil {
		fmt.Println(err) // bad input: errors.Is(err, redlock.ErrInvalid)
		return
	}
	// Close waits for releases still in flight and closes the
	// connections Dial opened.
	defer locker.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second) // how long to wait
	defer cancel()
	lock, err := locker.Lock(ctx, "report:daily", 30*time.Second)
	if err != nil { // matches redlock.ErrNotObtained
		switch {
		case errors.Is(err, redlock.ErrContended): // someone else holds it
			fmt.Println("busy:", err)
		case errors.Is(err, redlock.ErrUnreachable): // too few nodes answered
			fmt.Println("outage:", err)
		case errors.Is(err, context.DeadlineExceeded): // waited too long
			fmt.Println("gave up:", err)
		}
		return
	}
	defer func() {
		// Unlock fails when the nodes cannot confirm the release; the
		// keys then expire with their TTL.
		if err := lock.Unlock(context.WithoutCancel(ctx)); err != nil {
			fmt.Println("unlock:", err)
		}
	}()

	// Act only while the lock is provably held.
	if lock.Validity() > 0 {
		fmt.Println("holding", lock.Key())
	}
	// Output: holding report:daily
}

// Do holds the lock while fn runs: it waits for the lock, extends it in
// the background, cancels fn's ctx if it is lost, and releases it when
// fn returns.
func ExampleClient_Do() {
	locker, err := redlock.Dial(nodeURLs)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer locker.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second) // how long to wait
	defer cancel()
	err = locker.Do(ctx, "report:weekly", 30*time.Second, func(ctx context.Context) error {
		fmt.Println("building the report")
		return ctx.Err() // ctx ends if the lock is lost: stop then
	})
	switch {
	case errors.Is(err, redlock.ErrNotObtained):
		fmt.Println("not obtained:", err)
	case errors.Is(err, redlock.ErrLockLost):
		fmt.Println("lost the lock while working:", err)
	case err != nil:
		fmt.Println("the work failed:", err)
	}
	// Output: building the report
}

// A wait that ctx ends still says why the lock was not had: here, held
// by another owner.
func ExampleClient_Lock() {
	ctx := context.Background()

	first, err := locker.TryLock(ctx, "job:41", 10*time.Second)
	if err != nil {
		fmt.Println(err)
		return
	}
	wait, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	_, err = locker.Lock(wait, "job:41", 10*time.Second)
	fmt.Println("waited too long:", errors.Is(err, context.DeadlineExceeded))
	fmt.Println("held by another owner:", errors.Is(err, redlock.ErrContended))

	printErr("unlock", first.Unlock(ctx))
	// Output:
	// waited too long: true
	// held by another owner: true
}

func ExampleClient_TryLock() {
	ctx := context.Background()

	first, err := locker.TryLock(ctx, "job:42", 10*time.Second)
	if err != nil {
		fmt.Println(err)
		return
	}
	_, err = locker.TryLock(ctx, "job:42", 10*time.Second)
	switch {
	case errors.Is(err, redlock.ErrContended):
		fmt.Println("busy: another holder has it")
	case errors.Is(err, redlock.ErrUnreachable):
		fmt.Println("outage: too few nodes answered")
	}
	printErr("unlock", first.Unlock(ctx))
	// Output: busy: another holder has it
}

func ExampleQuorumError() {
	// Clients of its own, for New: this example closes two of them.
	clients, err := redlock.NewClients(nodeURLs...)
	if err != nil {
		fmt.Println(err)
		return
	}
	locker, err := redlock.New(clients)
	if err != nil {
		fmt.Println(err)
		return
	}
	// New's Client leaves its go-redis clients to the caller: close
	// them after it.
	defer closeAfter(locker, clients)
	// Two nodes are gone: a quorum of 2 of 3 is impossible.
	_ = clients[1].Close()
	_ = clients[2].Close()

	_, err = locker.TryLock(context.Background(), "job:43", 10*time.Second)
	var qe *redlock.QuorumError
	if errors.As(err, &qe) {
		fmt.Println("unreachable:", errors.Is(err, redlock.ErrUnreachable))
		for _, n := range qe.Nodes {
			if n.Status == "failed" {
				fmt.Println("node", n.Node+1, n.Status, n.Err)
			}
		}
	}
	// Output:
	// unreachable: true
	// node 2 failed redis: client is closed
	// node 3 failed redis: client is closed
}

func ExampleLock_Extend() {
	ctx := context.Background()

	lock, err := locker.TryLock(ctx, "batch", 5*time.Second)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer func() { printErr("unlock", lock.Unlock(ctx)) }()
	// Before the validity runs out, push the expiry further.
	if err := lock.Extend(ctx, 30*time.Second); errors.Is(err, redlock.ErrNotHeld) {
		fmt.Println("lost the lock: stop working")
		return
	}
	fmt.Println(lock.Validity() > 5*time.Second)
	// Output: true
}

func ExampleWithObserver() {
	// Count rounds by outcome; a real program feeds its metrics library
	// (extra/redlockprom, extra/redlockotel; docs/observability.md has
	// the metric names). The func must be safe for concurrent use.
	var mu sync.Mutex
	rounds := map[string]int{}
	observe := func(e redlock.Event) {
		if e.Kind == "round" {
			mu.Lock()
			rounds[e.Op+" "+e.Reason]++
			mu.Unlock()
		}
	}
	locker, err := redlock.Dial(nodeURLs, redlock.WithObserver(observe))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer locker.Close()
	ctx := context.Background()

	lock, err := locker.TryLock(ctx, "invoice:7", 10*time.Second)
	if err != nil {
		fmt.Println(err)
		return
	}
	_, err = locker.TryLock(ctx, "invoice:7", 10*time.Second)
	fmt.Println("second attempt contended:", errors.Is(err, redlock.ErrContended))
	printErr("extend", lock.Extend(ctx, 10*time.Second))
	printErr("unlock", lock.Unlock(ctx))

	mu.Lock()
	defer mu.Unlock()
	fmt.Println(rounds["lock won"], rounds["lock contended"], rounds["extend won"], rounds["unlock won"])
	// Output:
	// second attempt contended: true
	// 1 1 1 1
}

func ExampleClient_TryLockPath() {
	ctx := context.Background()

	// A folder lock covers the folder, everything below it and, while it
	// is held, keeps every folder above it from being locked.
	held, err := locker.TryLockPath(ctx, "proj/A/C", 10*time.Second)
	if err != nil {
		fmt.Println("not obtained:", err)
		return
	}
	defer func() { printErr("unlock", held.Unlock(ctx)) }()
	fmt.Println("holding", held.Key())

	for _, path := range []string{"proj/A/C/D", "proj/A", "proj/A/B", "proj/A/CD"} {
		l, err := locker.TryLockPath(ctx, path, 10*time.Second)
		switch {
		case errors.Is(err, redlock.ErrContended):
			fmt.Println(path, "refused")
		case err != nil:
			fmt.Println(path, "error:", err)
		default:
			fmt.Println(path, "free")
			if err := l.Unlock(ctx); err != nil {
				fmt.Println("unlock:", err)
			}
		}
	}
	// Output:
	// holding proj/A/C
	// proj/A/C/D refused
	// proj/A refused
	// proj/A/B free
	// proj/A/CD free
}

func ExampleClient_TryRLock() {
	ctx := context.Background()

	// Readers share the key; the writer is an ordinary TryLock on it.
	r1, err := locker.TryRLock(ctx, "doc:7", 10*time.Second)
	if err != nil {
		fmt.Println("not obtained:", err)
		return
	}
	r2, err := locker.TryRLock(ctx, "doc:7", 10*time.Second)
	fmt.Println("second reader in:", err == nil)

	_, err = locker.TryLock(ctx, "doc:7", 10*time.Second)
	fmt.Println("writer refused while reading:", errors.Is(err, redlock.ErrContended))

	printErr("unlock", r1.Unlock(ctx))
	printErr("unlock", r2.Unlock(ctx))
	w, err := locker.TryLock(ctx, "doc:7", 10*time.Second)
	if err != nil {
		fmt.Println("not obtained:", err)
		return
	}
	defer func() { printErr("unlock", w.Unlock(ctx)) }()
	fmt.Println("writer in once the readers left")

	_, err = locker.TryRLock(ctx, "doc:7", 10*time.Second)
	fmt.Println("reader refused while writing:", errors.Is(err, redlock.ErrContended))
	// Output:
	// second reader in: true
	// writer refused while reading: true
	// writer in once the readers left
	// reader refused while writing: true
}

func ExampleClient_TryAcquire() {
	ctx := context.Background()

	// At most 2 exports at once. Every user of the key passes the same
	// limit. With limit 2 a permit needs floor(2*3/3)+1 = 3 of 3 nodes.
	const limit = 2
	p1, err := locker.TryAcquire(ctx, "exports", limit, 10*time.Second)
	if err != nil {
		fmt.Println("not obtained:", err)
		return
	}
	p2, err := locker.TryAcquire(ctx, "exports", limit, 10*time.Second)
	if err != nil {
		fmt.Println("not obtained:", err)
		return
	}
	defer func() { printErr("unlock", p2.Unlock(ctx)) }()

	_, err = locker.TryAcquire(ctx, "exports", limit, 10*time.Second)
	fmt.Println("third permit refused:", errors.Is(err, redlock.ErrContended))

	// A returned permit can be taken again.
	printErr("unlock", p1.Unlock(ctx))
	p3, err := locker.TryAcquire(ctx, "exports", limit, 10*time.Second)
	if err != nil {
		fmt.Println("not obtained:", err)
		return
	}
	defer func() { printErr("unlock", p3.Unlock(ctx)) }()
	fmt.Println("permit taken again after a return")
	// Output:
	// third permit refused: true
	// permit taken again after a return
}

func ExampleMultiLock() {
	// Clients of its own: this example closes one of them.
	clients, err := redlock.NewClients(nodeURLs...)
	if err != nil {
		fmt.Println(err)
		return
	}
	// Every node must grant the lock: it survives data loss on up to two
	// of the three nodes, but not the loss of any one node's availability.
	locker, err := redlock.NewMultiLock(clients)
	if err != nil {
		fmt.Println(err)
		return
	}
	// NewMultiLock leaves its go-redis clients to the caller: close them
	// after it.
	defer closeAfter(locker, clients)
	ctx := context.Background()

	lock, err := locker.TryLock(ctx, "ledger:close", 10*time.Second)
	if err != nil {
		fmt.Println("not obtained:", err)
		return
	}
	fmt.Println("held on all", locker.Quorum(), "nodes")
	printErr("unlock", lock.Unlock(ctx))

	// With one node gone no lock can be won, whatever the others say.
	_ = clients[2].Close()
	_, err = locker.TryLock(ctx, "ledger:close", 10*time.Second)
	var qe *redlock.QuorumError
	if errors.Is(err, redlock.ErrUnreachable) && errors.As(err, &qe) {
		for _, n := range qe.Nodes {
			if n.Status == "failed" {
				fmt.Println("node", n.Node, n.Status)
			}
		}
	}
	// Output:
	// held on all 3 nodes
	// node 2 failed
}

func ExampleClient_TryLockKeys() {
	ctx := context.Background()

	// A transfer locks both accounts, or neither. With a Redis Cluster
	// node the keys must share a hash slot: "{bank}:account:1" and
	// "{bank}:account:2" do, through their common hash tag "bank".
	lock, err := locker.TryLockKeys(ctx, []string{"account:1", "account:2"}, 10*time.Second)
	if err != nil {
		fmt.Println("not obtained:", err)
		return
	}
	defer func() { printErr("unlock", lock.Unlock(ctx)) }()
	fmt.Println("holding", lock.Key())

	// A set that overlaps a held one is refused, and takes nothing.
	_, err = locker.TryLockKeys(ctx, []string{"account:2", "account:3"}, 10*time.Second)
	fmt.Println("account:2 busy:", errors.Is(err, redlock.ErrContended))

	// A disjoint set is independent.
	other, err := locker.TryLockKeys(ctx, []string{"account:3", "account:4"}, 10*time.Second)
	if err != nil {
		fmt.Println("not obtained:", err)
		return
	}
	defer func() { printErr("unlock", other.Unlock(ctx)) }()
	fmt.Println("account:3 and account:4 free")
	// Output:
	// holding account:1,account:2
	// account:2 busy: true
	// account:3 and account:4 free
}

// A resource kept in Redis, written only with the writer's fencing token:
// a holder that paused past its lease, and whose lock was taken by a later
// holder meanwhile, is refused by the resource itself.
func ExampleFencedSet() {
	opt, err := redis.ParseURL(storeURL) // where the resource lives
	if err != nil {
		fmt.Println(err)
		return
	}
	db := redis.NewClient(opt)
	defer db.Close()

	locker, err := redlock.Dial(nodeURLs, redlock.WithFencing())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer locker.Close()
	ctx := context.Background()

	first, err := locker.TryLock(ctx, "report:daily", 500*time.Millisecond)
	if err != nil {
		fmt.Println(err)
		return
	}
	// first pauses (GC, page fault, slow network) past its validity...
	for first.Validity() > 0 {
		time.Sleep(10 * time.Millisecond)
	}
	// ...and a second holder takes the lock once the keys expire.
	second, err := locker.Lock(ctx, "report:daily", 10*time.Second)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer func() { printErr("unlock", second.Unlock(ctx)) }()
	fmt.Println("second's token is larger:", second.Fence() > first.Fence())

	err = redlock.FencedSet(ctx, db, "report:daily:data", second.Fence(), "written by second")
	fmt.Println("second writes:", err)

	// first wakes up and writes with its old token: refused.
	err = redlock.FencedSet(ctx, db, "report:daily:data", first.Fence(), "written by first")
	fmt.Println("first is refused:", errors.Is(err, redlock.ErrStaleFence))

	v, _ := db.HGet(ctx, "report:daily:data", "value").Result()
	fmt.Println("value:", v)
	// Output:
	// second's token is larger: true
	// second writes: <nil>
	// first is refused: true
	// value: written by second
}

// Who holds a lock, as a quorum of nodes sees it: its holder's metadata
// and remaining TTL, never its token. A contender's error says the same.
func ExampleClient_Inspect() {
	ctx := context.Background()

	l, err := locker.TryLock(ctx, "job:43", 30*time.Second, redlock.WithMetadata("host-a pid 4242"))
	if err != nil {
		fmt.Println(err)
		return
	}
	h, err := locker.Inspect(ctx, "job:43")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(h.State, "by", h.Metadata, "for at most 30s:", h.TTL > 0 && h.TTL <= 30*time.Second)

	_, err = locker.TryLock(ctx, "job:43", 30*time.Second)
	var qe *redlock.QuorumError
	if errors.As(err, &qe) {
		for _, n := range qe.Nodes {
			if n.Status == "taken" {
				fmt.Println("refused, held by", n.Holder)
				break
			}
		}
	}
	printErr("unlock", l.Unlock(ctx))
	h, _ = locker.Inspect(ctx, "job:43")
	fmt.Println(h.State)
	// Output:
	// held by host-a pid 4242 for at most 30s: true
	// refused, held by host-a pid 4242
	// free
}

// One leader at a time: Campaign waits until elected; the term is a
// fencing token that rises from leader to leader; Resign hands leadership
// on to the next candidate at once.
func ExampleElection_Campaign() {
	ctx := context.Background()
	e := locker.Election("scheduler")

	lead, err := e.Campaign(ctx, "host-a", 10*time.Second)
	if err != nil {
		fmt.Println(err)
		return
	}
	info, err := e.Leader(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("leader:", info.Value, "same term:", info.Term == lead.Lock().Fence())

	printErr("proclaim", lead.Proclaim(ctx, "host-a:v2"))
	info, _ = e.Leader(ctx)
	fmt.Println("leader:", info.Value)

	printErr("resign", lead.Resign(ctx))
	_, err = e.Leader(ctx)
	fmt.Println("no leader:", errors.Is(err, redlock.ErrNoLeader))
	// Output:
	// leader: host-a same term: true
	// leader: host-a:v2
	// no leader: true
}

// Observe delivers each change of leader or value, in term order.
func ExampleElection_Observe() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	e := locker.Election("observed")
	changes := e.Observe(ctx)

	lead, err := e.Campaign(ctx, "host-a", 10*time.Second)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println((<-changes).Value)
	printErr("proclaim", lead.Proclaim(ctx, "host-a:v2"))
	fmt.Println((<-changes).Value)
	printErr("resign", lead.Resign(ctx))
	// Output:
	// host-a
	// host-a:v2
}

// Run campaigns, then runs the leader's work with a ctx that ends if
// leadership is lost; it resigns when the work returns.
func ExampleElection_Run() {
	ctx := context.Background()
	err := locker.Election("compactor").Run(ctx, "host-a", 10*time.Second, func(ctx context.Context) error {
		fmt.Println("leading: compacting")
		return nil
	})
	fmt.Println("done:", err)
	// Output:
	// leading: compacting
	// done: <nil>
}
