package chaos

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// ErrNoProxy is returned by Slow and Partition on a Cluster started
// without ClusterOptions.Proxy.
var ErrNoProxy = errors.New("chaos: cluster has no proxies")

// Every fault below can be called at any time, mid-lock included, from
// any goroutine; each one is recorded as an Event of the cluster's
// Recorder before it returns.

// Kill kills node i with SIGKILL (kill -9). It stays down until Restart.
func (c *Cluster) Kill(i int) error {
	if err := c.nodes[i].Kill(); err != nil {
		return fmt.Errorf("chaos: kill node %d: %w", i+1, err)
	}
	c.rec.Event(i, EventKill, "kill -9")
	return nil
}

// Pause stops node i with SIGSTOP: it keeps its connections and answers
// nothing until Resume.
func (c *Cluster) Pause(i int) error {
	if err := c.nodes[i].Pause(); err != nil {
		return fmt.Errorf("chaos: pause node %d: %w", i+1, err)
	}
	c.rec.Event(i, EventPause, "SIGSTOP")
	return nil
}

// Resume continues node i after Pause (SIGCONT).
func (c *Cluster) Resume(i int) error {
	if err := c.nodes[i].Resume(); err != nil {
		return fmt.Errorf("chaos: resume node %d: %w", i+1, err)
	}
	c.rec.Event(i, EventResume, "SIGCONT")
	return nil
}

// Restart kills node i if it runs and starts it again at once on the same
// address. Its keys are lost unless the cluster is AppendOnly, in which
// case the node replays its append-only file.
func (c *Cluster) Restart(i int) error {
	if err := c.nodes[i].Restart(); err != nil {
		return fmt.Errorf("chaos: restart node %d: %w", i+1, err)
	}
	detail := "memory lost"
	if c.opts.AppendOnly {
		detail = "AOF kept"
	}
	c.rec.Event(i, EventRestart, detail)
	return nil
}

// RestartAfter kills node i, keeps it down for d (the Redlock spec's
// delayed restart: d longer than the largest TTL means no lock it granted
// can still be held), then restarts it. It returns ctx.Err() with the
// node left down if ctx ends first.
func (c *Cluster) RestartAfter(ctx context.Context, i int, d time.Duration) error {
	if err := c.Kill(i); err != nil {
		return err
	}
	if err := sleep(ctx, d); err != nil {
		return err
	}
	return c.Restart(i)
}

// Slow delays every reply of node i by d through its proxy; d <= 0
// removes the delay. It returns ErrNoProxy without proxies.
func (c *Cluster) Slow(i int, d time.Duration) error {
	if c.proxies == nil {
		return ErrNoProxy
	}
	if err := c.proxies[i].SetLatency(d, 0); err != nil {
		return err
	}
	c.rec.Event(i, EventSlow, fmt.Sprintf("+%v latency", d))
	return nil
}

// Partition cuts node i off from every client: its proxy drops all bytes
// both ways until Heal. It returns ErrNoProxy without proxies.
func (c *Cluster) Partition(i int) error {
	if c.proxies == nil {
		return ErrNoProxy
	}
	if err := c.proxies[i].Partition(); err != nil {
		return err
	}
	c.rec.Event(i, EventPartition, "all bytes dropped")
	return nil
}

// Heal removes latency and partitions from node i's proxy.
func (c *Cluster) Heal(i int) error {
	if c.proxies == nil {
		return ErrNoProxy
	}
	c.proxies[i].Heal()
	c.rec.Event(i, EventHeal, "")
	return nil
}

// Skew makes node i's clock run rate times as fast as real time, as far
// as key expiry goes: every TTL that clients send to it is divided by
// rate (see SkewHook). Rate 1 removes the skew.
func (c *Cluster) Skew(i int, rate float64) {
	c.skew[i].Set(rate)
	if rate == 1 {
		c.rec.Event(i, EventUnskew, "")
		return
	}
	c.rec.Event(i, EventSkew, fmt.Sprintf("clock rate x%g", rate))
}

// sleep waits for d or until ctx is done.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
