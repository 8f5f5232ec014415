package main

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/seed543a70bd/redlock"
	"github.com/seed543a70bd/redlock/internal/redisnode"
)

// The demo's workers and its fault: what happens; demo.go reports it.

// worker takes the lock over and over until ctx is done.
func (d *demoRun) worker(ctx context.Context, c *redlock.Client, w int) {
	for ctx.Err() == nil {
		l, err := c.TryLock(ctx, demoKey, demoTTL)
		if err != nil {
			switch {
			case ctx.Err() != nil:
				return
			case errors.Is(err, redlock.ErrContended):
				d.contended.Add(1)
			default:
				d.failed.Add(1)
				d.lastErr.Store(&err)
			}
			sleepCtx(ctx, time.Duration(5+rand.IntN(20))*time.Millisecond)
			continue
		}
		start := time.Now()
		d.take(w)
		_ = l.AutoExtend(context.WithoutCancel(ctx))
		work := time.Duration(5+rand.IntN(20)) * time.Millisecond
		if rand.IntN(demoLongEv) == 0 {
			work = demoTTL * 6 / 10
		}
		t := time.NewTimer(work)
		select {
		case <-t.C:
		case <-l.Done():
		}
		t.Stop()
		end := time.Now()
		lost := errors.Is(l.Err(), redlock.ErrLockLost)
		d.release(hold{worker: w, token: l.Token(), start: start, end: end, deadline: l.Deadline(), lost: lost}, l.Extensions())
		_ = l.Unlock(context.WithoutCancel(ctx))
		sleepCtx(ctx, time.Duration(5+rand.IntN(10))*time.Millisecond) // let others in
	}
}

func (d *demoRun) take(w int) {
	d.acquired.Add(1)
	d.mu.Lock()
	defer d.mu.Unlock()
	d.holder = w
	if d.last >= 0 && d.last != w {
		d.handoff++
	}
	d.last = w
}

func (d *demoRun) release(h hold, ext int) {
	d.extended.Add(int64(ext))
	if h.lost {
		d.lost.Add(1)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.holds = append(d.holds, h)
	if d.holder == h.worker {
		d.holder = -1
	}
}

func (d *demoRun) handoffs() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.handoff
}

// faults kills node 3 while a worker holds the lock, about a third of the
// way in, and restarts it at two thirds.
func (d *demoRun) faults(ctx context.Context, nodes []*redisnode.Node, dur time.Duration, say func(string, ...any)) {
	const victim = 2 // node 3
	if !sleepCtx(ctx, dur*3/10) {
		return
	}
	for { // wait for a moment when the lock is held
		d.mu.Lock()
		holder := d.holder
		if holder >= 0 {
			err := nodes[victim].Kill()
			d.events = append(d.events, nodeEvent{at: time.Now(), node: victim, what: "killed"})
			d.mu.Unlock()
			if err != nil {
				say("killing node %d: %v", victim+1, err)
				return
			}
			say("killed node %d (%s) while worker %d held the lock", victim+1, nodes[victim].Addr(), holder+1)
			break
		}
		d.mu.Unlock()
		if !sleepCtx(ctx, 2*time.Millisecond) {
			return
		}
	}
	if !sleepCtx(ctx, dur*35/100) {
		ctx = context.Background() // restart it anyway, for the record
	}
	err := nodes[victim].Restart()
	d.mu.Lock()
	d.events = append(d.events, nodeEvent{at: time.Now(), node: victim, what: "restarted"})
	d.mu.Unlock()
	if err != nil {
		say("restarting node %d: %v", victim+1, err)
		return
	}
	say("restarted node %d; its append-only file kept every key it had granted", victim+1)
}
