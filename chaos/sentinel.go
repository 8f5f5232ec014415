package chaos

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seed543a70bd/redlock/internal/redisnode"
)

// Replicated nodes: each of the cluster's nodes becomes a master with one
// replica, and three Sentinels (quorum 2) watch every master. The lock
// clients reach each node through go-redis's FailoverClient, which asks
// the Sentinels where the master is, so they follow a promotion.

// Sentinel timings: a master is down after sentinelDownAfter without
// an answer; a failover that a Sentinel leader started but did not
// finish is retried after twice sentinelFailoverTimeout.
const (
	sentinelDownAfter       = 400 * time.Millisecond
	sentinelFailoverTimeout = 2 * time.Second
)

// replicated is the replicas and Sentinels of a cluster's nodes.
type replicated struct {
	cl        *Cluster
	names     []string // Sentinel's master name of each node
	replicas  []*redisnode.Node
	sentinels []*redisnode.Node
}

// replicate gives each of cl's nodes a replica and starts three
// Sentinels watching them, and returns once every replica acknowledges
// writes (WAIT) and every Sentinel knows every replica and the other
// Sentinels. It needs the Local backend: the replicas and Sentinels are
// local processes that reach the masters on loopback.
func replicate(ctx context.Context, cl *Cluster) (_ *replicated, err error) {
	if _, ok := cl.opts.Backend.(Local); !ok && cl.opts.Backend != nil {
		return nil, fmt.Errorf("%w: replicated nodes need the local backend", ErrBackend)
	}
	r := &replicated{cl: cl}
	defer func() {
		if err != nil {
			r.close()
		}
	}()
	n := cl.N()
	r.replicas = make([]*redisnode.Node, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		r.names = append(r.names, fmt.Sprintf("lock%d", i))
		wg.Go(func() { r.replicas[i], errs[i] = r.startReplica(ctx, i) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	var conf strings.Builder
	for i, name := range r.names {
		_, port, _ := net.SplitHostPort(cl.Node(i).Addr())
		fmt.Fprintf(&conf, "sentinel monitor %s 127.0.0.1 %s 2\n", name, port)
		fmt.Fprintf(&conf, "sentinel down-after-milliseconds %s %d\n", name, sentinelDownAfter.Milliseconds())
		fmt.Fprintf(&conf, "sentinel failover-timeout %s %d\n", name, sentinelFailoverTimeout.Milliseconds())
	}
	r.sentinels, err = redisnode.StartN(3, redisnode.Options{Sentinel: true, Config: conf.String()})
	if err != nil {
		return nil, err
	}
	return r, r.awaitSentinels(ctx, 20*time.Second)
}

// startReplica starts a replica of node i and waits until a write on the
// master is acknowledged by it: after a diskless sync, a master streams
// writes to a replica only from its first REPLCONF ACK, up to a second
// after both report the link up.
func (r *replicated) startReplica(ctx context.Context, i int) (*redisnode.Node, error) {
	admin := r.cl.Admin(i)
	if err := admin.ConfigSet(ctx, "repl-diskless-sync-delay", "0").Err(); err != nil {
		return nil, err
	}
	_, port, _ := net.SplitHostPort(r.cl.Node(i).Addr())
	rep, err := redisnode.Start(redisnode.Options{Args: []string{"--replicaof", "127.0.0.1", port}})
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		err := admin.Set(ctx, "chaos:replica-probe", "x", time.Second).Err()
		if err == nil {
			var acked int64
			if acked, err = admin.Do(ctx, "wait", 1, 400).Int64(); err == nil && acked >= 1 {
				return rep, nil
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			_ = rep.Close()
			return nil, fmt.Errorf("replica of node %d: no write acknowledged: %v", i+1, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// sentinel returns a client of Sentinel k; the caller closes it.
func (r *replicated) sentinel(k int) *redis.SentinelClient {
	return redis.NewSentinelClient(&redis.Options{
		Addr: r.sentinels[k].Addr(), MaxRetries: -1, DialerRetries: 1,
		DialTimeout: 250 * time.Millisecond, ReadTimeout: time.Second,
	})
}

// awaitSentinels waits until every Sentinel knows, for every master, its
// replica and the two other Sentinels: only then can they agree that a
// master is down and elect one of them to fail it over.
func (r *replicated) awaitSentinels(ctx context.Context, d time.Duration) error {
	deadline := time.Now().Add(d)
	for k := range r.sentinels {
		sc := r.sentinel(k)
		defer sc.Close()
		for _, name := range r.names {
			for {
				reps, err1 := sc.Replicas(ctx, name).Result()
				sens, err2 := sc.Sentinels(ctx, name).Result()
				if err1 == nil && err2 == nil && len(reps) == 1 && len(sens) == len(r.sentinels)-1 {
					break
				}
				if time.Now().After(deadline) {
					return fmt.Errorf("sentinel %d: after %v, %s: want 1 replica and %d sentinels, got %d (%v) and %d (%v)",
						k, d, name, len(r.sentinels)-1, len(reps), err1, len(sens), err2)
				}
				if err := sleep(ctx, 100*time.Millisecond); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// clients returns a FailoverClient per node, with the fail-fast settings
// of Cluster.Clients; the cluster closes them.
func (r *replicated) clients() []redis.UniversalClient {
	var addrs []string
	for _, s := range r.sentinels {
		addrs = append(addrs, s.Addr())
	}
	out := make([]redis.UniversalClient, len(r.names))
	for i, name := range r.names {
		fc := redis.NewFailoverClient(&redis.FailoverOptions{
			MasterName:    name,
			SentinelAddrs: addrs,
			DialTimeout:   250 * time.Millisecond,
			ReadTimeout:   500 * time.Millisecond,
			WriteTimeout:  500 * time.Millisecond,
			MaxRetries:    -1,
			DialerRetries: 1,
		})
		r.cl.track(fc)
		out[i] = fc
	}
	return out
}

// holdBack cuts node i's replica off its master, so that what the master
// is written from now on never reaches it: the replica's next handshake
// sends AUTH with a password the master does not have, which fails, and
// the master drops its replica connection. This is the window of
// asynchronous replication (a master that acknowledged a write its
// replica does not have yet), held open for as long as needed.
func (r *replicated) holdBack(ctx context.Context, i int) error {
	rc := redis.NewClient(&redis.Options{Addr: r.replicas[i].Addr(), MaxRetries: -1})
	defer rc.Close()
	if err := rc.ConfigSet(ctx, "masterauth", "no-such-password").Err(); err != nil {
		return fmt.Errorf("replica of node %d: %w", i+1, err)
	}
	admin := r.cl.Admin(i)
	if err := admin.Do(ctx, "client", "kill", "type", "replica").Err(); err != nil {
		return fmt.Errorf("node %d: CLIENT KILL TYPE replica: %w", i+1, err)
	}
	info, err := admin.Info(ctx, "replication").Result()
	if err != nil {
		return err
	}
	if !strings.Contains(info, "connected_slaves:0") {
		return fmt.Errorf("node %d: want its replica cut off, got %q", i+1, info)
	}
	r.cl.rec.Event(i, EventNote, fmt.Sprintf("node %d's replica cut off its master", i+1))
	return nil
}

// awaitPromotion waits until the Sentinels name node i's replica its
// master, and returns how long that took.
func (r *replicated) awaitPromotion(ctx context.Context, i int, d time.Duration) (time.Duration, error) {
	start := time.Now()
	want := strconv.Itoa(r.replicas[i].Port())
	sc := r.sentinel(0)
	defer sc.Close()
	for {
		addr, err := sc.GetMasterAddrByName(ctx, r.names[i]).Result()
		if err == nil && len(addr) == 2 && addr[1] == want {
			return time.Since(start), nil
		}
		if time.Since(start) > d {
			return 0, fmt.Errorf("node %d: replica %s not promoted after %v (sentinel says %v, %v)", i+1, r.replicas[i].Addr(), d, addr, err)
		}
		if err := sleep(ctx, 50*time.Millisecond); err != nil {
			return 0, err
		}
	}
}

// close stops the Sentinels and the replicas.
func (r *replicated) close() {
	for _, s := range r.sentinels {
		_ = s.Close()
	}
	for _, rep := range r.replicas {
		if rep != nil {
			_ = rep.Close()
		}
	}
}
