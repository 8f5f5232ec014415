package redlock

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seed543a70bd/redlock/internal/node"
	"github.com/seed543a70bd/redlock/internal/wire"
)

// releaseAll releases the lost attempt's keys on nodes concurrently and
// waits, bounded by the per-node timeout, under a context the caller's
// cancellation cannot cut short. A release that fails, or that is still
// in flight when the wait ends and then fails, is retried in the
// background (retryRelease).
func (rd *round) releaseAll(nodes []*node.Node, uncertain []bool) {
	var wg sync.WaitGroup
	for k, nd := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rd.release(nd, uncertain[k])
		}()
	}
	// Bounded here too: go-redis may not honour the context deadline.
	node.WaitTimeout(wg.Wait, rd.timeout)
}

// release is the clean-up release of this acquire round's token on nd.
// Its request gets at least releaseTimeout: it spends no validity, and a
// release cut at a per-node timeout of a few milliseconds on a loaded
// machine would leave the key for its whole TTL. When it fails all the
// same, it is retried in the background (retryRelease).
//
// uncertain says the acquire failed on nd (a timeout, a dropped
// connection) rather than granting: it may still sit in the server's
// socket and run after this release, which went out on another
// connection. Then a release that found nothing is checked once more,
// node.RetryRecheck later.
func (rd *round) release(nd *node.Node, uncertain bool) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(rd.parent), max(rd.timeout, releaseTimeout))
	defer cancel()
	// A clean-up, not an Unlock: no announcement, so that the releases of
	// split votes do not wake every waiter into another split.
	start := time.Now()
	req := &request{w: wire.Request{Op: opRelease, Token: rd.token, TTL: rd.ttl}, keys: rd.req.keys, prefix: rd.req.prefix, fam: rd.req.fam, userToken: rd.req.userToken}
	rd.c.flights.Add(1)
	r := exec(ctx, rd.c, nd, req)
	rd.c.flights.Done()
	if rd.cfg.obs != nil || rd.cfg.log != nil {
		rd.observeCleanup(nd, r, time.Since(start))
	}
	switch {
	case r.St == wire.StatusFailed:
		retryRelease(rd.c, nd, req, rd.ttl, r.Err, 0)
	case uncertain && r.St != wire.StatusOK:
		retryRelease(rd.c, nd, req, rd.ttl, nil, node.RetryRecheck)
	}
}

// retryRelease hands req, a release that failed on nd, to nd's
// background retries (node.Node.RetryRelease) until the key has expired
// by itself: ttl, the TTL the released token was set with, plus drift.
// err is the failure; with a positive recheck, req did not fail but
// found nothing while the request it undoes may still land. Releases of
// a closed go-redis client are dropped, and so are those of a token
// given with WithToken, which a later lock may reuse: a retry sent after
// it would delete that lock's key.
func retryRelease(c *Client, nd *node.Node, req *request, ttl time.Duration, err error, recheck time.Duration) {
	if errors.Is(err, redis.ErrClosed) || req.userToken {
		return
	}
	nd.RetryRelease(&req.w, req.keys, time.Now().Add(ttl+drift(ttl, c.cfg.driftFactor)), recheck)
}

// undoHeal releases node i of an extension whose lock is over: the
// extension healed the node (or failed there, and so may have), after
// the lock's last chance to release it. Unlock hands its release to
// every node after setting Lock.over, so an extension that ran after
// that release on a node replies after Lock.over was set, and is
// released again here; one that ran before it was undone by it.
// uncertain: the extension failed, and may still land. The release runs
// on a goroutine of its own, counted for Close: Report runs on the
// node's pipe leader, which must not wait for it.
func (rd *round) undoHeal(i int, uncertain bool) {
	if rd.req.over.Load() {
		rd.c.flights.Add(1)
		go func() {
			defer rd.c.flights.Done()
			rd.release(rd.c.nodes[i], uncertain)
		}()
	}
}
