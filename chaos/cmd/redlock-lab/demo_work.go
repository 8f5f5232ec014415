package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/seed543a70bd/redlock"
	"github.com/seed543a70bd/redlock/chaos"
	"github.com/seed543a70bd/redlock/internal/redisnode"
)

// The demo's workers and its fault: what happens, recorded in d.rec;
// demo.go and report.go tell of it.

// worker takes the lock over and over until ctx is done.
func (d *demoRun) worker(ctx context.Context, c *redlock.Client, w int) {
	clock := d.rec.Clock()
	for ctx.Err() == nil {
		t0 := clock.Now()
		l, err := c.TryLock(ctx, demoKey, demoTTL)
		t1 := clock.Now()
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			d.rec.Attempt(chaos.Attempt{Client: w, Key: demoKey, Start: t0, Latency: t1 - t0, Reason: attemptReason(err)})
			if errors.Is(err, redlock.ErrContended) {
				d.contended.Add(1)
			} else {
				d.failed.Add(1)
				d.lastErr.Store(&err)
			}
			sleepCtx(ctx, time.Duration(5+rand.IntN(20))*time.Millisecond)
			continue
		}
		d.rec.Attempt(chaos.Attempt{Client: w, Key: demoKey, Start: t0, Latency: t1 - t0, OK: true})
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
		d.rec.Section(chaos.Section{
			Client: w, Key: demoKey, Token: l.Token(), Fence: l.Fence(),
			Attempt: t0, Acquired: t1, Released: clock.Now(), Deadline: clock.Of(time.Now().Add(l.Validity())),
		})
		d.release(w, l.Extensions(), errors.Is(l.Err(), redlock.ErrLockLost))
		_ = l.Unlock(context.WithoutCancel(ctx))
		sleepCtx(ctx, time.Duration(5+rand.IntN(10))*time.Millisecond) // let others in
	}
}

// attemptReason classifies a failed TryLock as the chaos suite does, so
// that the timeline draws its tick alike: red when a node was
// unreachable, grey when the lock was only held by another worker.
func attemptReason(err error) string {
	contended, unreachable := errors.Is(err, redlock.ErrContended), errors.Is(err, redlock.ErrUnreachable)
	switch {
	case contended && unreachable:
		return "contended+unreachable"
	case contended:
		return "contended"
	case unreachable:
		return "unreachable"
	}
	return "error: " + err.Error()
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

func (d *demoRun) release(w, ext int, lost bool) {
	d.extended.Add(int64(ext))
	if lost {
		d.lost.Add(1)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.holder == w {
		d.holder = -1
	}
}

func (d *demoRun) handoffs() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.handoff
}

// faults kills node demoVictim while a worker holds the lock, about a
// third of the way in, and restarts it at two thirds. It records both in
// d.rec, as the chaos suite records its faults.
func (d *demoRun) faults(ctx context.Context, nodes []*redisnode.Node, dur time.Duration, say func(string, ...any)) {
	victim := nodes[demoVictim]
	if !sleepCtx(ctx, dur*3/10) {
		return
	}
	for { // wait for a moment when the lock is held
		d.mu.Lock()
		holder := d.holder
		if holder >= 0 {
			err := victim.Kill()
			if err == nil {
				d.rec.Event(demoVictim, chaos.EventKill, fmt.Sprintf("while worker %d held the lock", holder+1))
			}
			d.mu.Unlock()
			if err != nil {
				say("killing node %d: %v", demoVictim+1, err)
				return
			}
			say("killed node %d (redis://%s) while worker %d held the lock", demoVictim+1, victim.Addr(), holder+1)
			break
		}
		d.mu.Unlock()
		if !sleepCtx(ctx, 2*time.Millisecond) {
			return
		}
	}
	sleepCtx(ctx, dur*35/100) // if the run ends first, restart it anyway, for the record
	if err := victim.Restart(); err != nil {
		say("restarting node %d: %v", demoVictim+1, err)
		return
	}
	d.rec.Event(demoVictim, chaos.EventRestart, "from its append-only file")
	say("restarted node %d; its append-only file kept every key it had granted", demoVictim+1)
}
