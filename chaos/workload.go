package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/seed543a70bd/redlock"
)

// tryLocker is what a workload client locks with: *redlock.Client and
// *redlock.MultiLock both are one.
type tryLocker interface {
	TryLock(ctx context.Context, key string, ttl time.Duration, opts ...redlock.LockOption) (*redlock.Lock, error)
}

var (
	_ tryLocker = (*redlock.Client)(nil)
	_ tryLocker = (*redlock.MultiLock)(nil)
)

// workload is K clients contending for keys. Each client has its own
// go-redis clients and its own redlock client, and loops: TryLock a
// random key; on success write to the protected resource with the lock's
// fencing token, hold, Unlock; on failure wait and try again. Every
// attempt, critical section and write goes into the History.
type workload struct {
	Clients int              // K. Default: 4.
	Keys    []string         // the contended keys. Default: one key, "k".
	TTL     time.Duration    // lock TTL. Default: 500ms.
	Hold    time.Duration    // a section lasts a random time in [Hold/2, Hold]. Default: 60ms.
	Greedy  bool             // hold to the validity deadline and let the lock expire: no Unlock
	Pause   time.Duration    // mean wait after a lost attempt and after a release (±50%). Default: 10ms.
	Options []redlock.Option // given to New (or NewMultiLock); WithFencing is always added
	Multi   bool             // lock with NewMultiLock (every node) instead of New (a majority)
}

func (w *workload) defaults() {
	if w.Clients <= 0 {
		w.Clients = 4
	}
	if len(w.Keys) == 0 {
		w.Keys = []string{"k"}
	}
	if w.TTL <= 0 {
		w.TTL = 500 * time.Millisecond
	}
	if w.Hold <= 0 {
		w.Hold = 60 * time.Millisecond
	}
	if w.Pause <= 0 {
		w.Pause = 10 * time.Millisecond
	}
}

// locker returns a new lock client of the workload's kind over fresh
// go-redis clients.
func (e *env) locker(multi bool, opts ...redlock.Option) (tryLocker, error) {
	opts = append([]redlock.Option{redlock.WithFencing()}, opts...)
	if multi {
		return redlock.NewMultiLock(e.cl.Clients(), opts...)
	}
	return redlock.New(e.cl.Clients(), opts...)
}

// start runs w until stop is called; stop waits for every client to
// release what it holds and return.
func (e *env) start(ctx context.Context, w workload) (stop func(), err error) {
	w.defaults()
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for range w.Clients {
		lk, err := e.locker(w.Multi, w.Options...)
		if err != nil {
			cancel()
			wg.Wait()
			return nil, err
		}
		id := e.newClientID()
		wg.Add(1)
		go func() {
			defer wg.Done()
			e.loop(ctx, id, lk, w)
		}()
	}
	return func() { cancel(); wg.Wait() }, nil
}

// loop is one workload client.
func (e *env) loop(ctx context.Context, id int, lk tryLocker, w workload) {
	for ctx.Err() == nil {
		key := w.Keys[rand.IntN(len(w.Keys))]
		l, err := e.try(ctx, id, lk, key, w.TTL, false)
		if err != nil {
			_ = sleep(ctx, jitter(w.Pause))
			continue
		}
		if w.Greedy {
			_ = e.write(ctx, id, l)
			_ = sleep(ctx, time.Until(time.Now().Add(l.Validity())))
			e.abandon(l)
			continue
		}
		e.hold(ctx, id, l, w.Hold/2+rand.N(w.Hold/2+1))
		_ = sleep(ctx, jitter(w.Pause))
	}
}

// try makes one TryLock attempt and records it. A lock obtained is
// counted as held (Recorder.Open) before try returns: release or abandon
// must follow.
func (e *env) try(ctx context.Context, id int, lk tryLocker, key string, ttl time.Duration, probe bool) (*redlock.Lock, error) {
	clock := e.rec.Clock()
	t0 := clock.Now()
	l, err := lk.TryLock(ctx, key, ttl)
	t1 := clock.Now()
	if err != nil && ctx.Err() != nil {
		return nil, err // the run is over: not an attempt that says anything
	}
	e.rec.Attempt(Attempt{Client: id, Key: key, Start: t0, Latency: t1 - t0, OK: err == nil, Reason: reasonOf(err), Probe: probe})
	if err != nil {
		return nil, err
	}
	e.rec.Open()
	e.open.Store(l, Section{
		Client: id, Key: key, Token: l.Token(), Fence: l.Fence(),
		Attempt: t0, Acquired: t1, Released: Never, Deadline: clock.Of(time.Now().Add(l.Validity())),
	})
	return l, nil
}

// hold writes to the resource with l's fence, keeps l for d (less if ctx
// ends), then records the section and releases it.
func (e *env) hold(ctx context.Context, id int, l *redlock.Lock, d time.Duration) {
	_ = e.write(ctx, id, l)
	_ = sleep(ctx, d)
	e.release(l)
}

// release ends l's section now and unlocks it.
func (e *env) release(l *redlock.Lock) {
	v, ok := e.open.LoadAndDelete(l)
	if !ok {
		return
	}
	s := v.(Section)
	s.Released = e.rec.Clock().Now()
	e.rec.Section(s)
	e.rec.Close()
	_ = l.Unlock(context.Background())
}

// abandon ends l's section without releasing it: its holder is gone (or
// paused), and only the deadline ends its safe window.
func (e *env) abandon(l *redlock.Lock) {
	if v, ok := e.open.LoadAndDelete(l); ok {
		e.rec.Section(v.(Section))
		e.rec.Close()
	}
}

// write writes to the protected resource under l's fencing token and
// records the outcome; the error is the resource's.
func (e *env) write(ctx context.Context, id int, l *redlock.Lock) error {
	clock := e.rec.Clock()
	key := "res:" + l.Key()
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	defer cancel()
	t0 := clock.Now()
	err := e.res.Write(wctx, key, l.Fence(), fmt.Sprintf("client %d token %s", id, l.Token()))
	t1 := clock.Now()
	e.rec.Write(Write{
		Client: id, Key: key, Fence: l.Fence(), Start: t0, End: t1,
		Accepted: err == nil, Late: t0 > clock.Of(time.Now().Add(l.Validity())),
	})
	return err
}

// probe makes an uncontended TryLock and Unlock on a fresh key every
// `every` until ctx ends, to measure acquire latency apart from
// contention. Its attempts are recorded with Probe set; its sections are
// not recorded (no other client uses its keys).
func (e *env) probe(ctx context.Context, every time.Duration, ttl time.Duration, opts ...redlock.Option) (stop func(), err error) {
	lk, err := e.locker(false, opts...)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	id := e.newClientID()
	go func() {
		defer close(done)
		for n := 0; ctx.Err() == nil; n++ {
			l, err := e.try(ctx, id, lk, fmt.Sprintf("probe-%d-%d", id, n), ttl, true)
			if err == nil {
				e.open.Delete(l)
				e.rec.Close()
				_ = l.Unlock(context.Background())
			}
			_ = sleep(ctx, every)
		}
	}()
	return func() { cancel(); <-done }, nil
}

// reasonOf classifies a TryLock error for the History.
func reasonOf(err error) string {
	switch {
	case err == nil:
		return ""
	case !errors.Is(err, redlock.ErrNotObtained):
		return "error: " + err.Error()
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return "canceled"
	case errors.Is(err, redlock.ErrExpired):
		return "expired"
	case errors.Is(err, redlock.ErrContended) && errors.Is(err, redlock.ErrUnreachable):
		return "contended+unreachable"
	case errors.Is(err, redlock.ErrContended):
		return "contended"
	case errors.Is(err, redlock.ErrUnreachable):
		return "unreachable"
	}
	return "not obtained"
}

// jitter draws a delay uniformly from [d/2, 3d/2).
func jitter(d time.Duration) time.Duration {
	if d <= 1 {
		return d
	}
	return d/2 + rand.N(d)
}
