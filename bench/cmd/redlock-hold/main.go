// Command redlock-hold measures what holding many auto-extended locks on
// one Client costs: it starts 5 local redis-server nodes,
// takes -locks locks on distinct keys from -workers goroutines, puts
// every one under AutoExtend, holds them for -hold, and reports the take
// rate, the goroutines and heap per lock while holding, the client's
// CPU (user + system, this process only: the servers are other
// processes), and how many locks were lost.
//
//	go run ./cmd/redlock-hold -locks 100000 -ttl 10s -hold 60s
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seed543a70bd/redlock"
	"github.com/seed543a70bd/redlock/internal/redisnode"
)

type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

func main() {
	n := flag.Int("locks", 100000, "locks to hold")
	workers := flag.Int("workers", 256, "goroutines taking the locks")
	ttl := flag.Duration("ttl", 10*time.Second, "TTL of every lock")
	hold := flag.Duration("hold", 60*time.Second, "how long to hold them")
	prof := flag.String("cpuprofile", "", "write a CPU profile of the hold to `file`")
	flag.Parse()
	if err := run(*n, *workers, *ttl, *hold, *prof); err != nil {
		fmt.Fprintln(os.Stderr, "redlock-hold:", err)
		os.Exit(1)
	}
}

func run(n, workers int, ttl, hold time.Duration, prof string) error {
	redis.SetLogger(quiet{})
	servers, err := redisnode.StartN(5, redisnode.Options{})
	if err != nil {
		return err
	}
	defer func() {
		for _, s := range servers {
			_ = s.Close()
		}
	}()
	var cs []redis.UniversalClient
	for _, s := range servers {
		c := redis.NewClient(&redis.Options{Addr: s.Addr(), PoolSize: 64})
		defer c.Close()
		cs = append(cs, c)
	}
	rl, err := redlock.New(cs)
	if err != nil {
		return err
	}
	defer rl.Close()
	ctx := context.Background()

	// Warm up: dial and identify the nodes.
	if _, err := take(ctx, rl, "warm", 1024, workers, ttl, true); err != nil {
		return err
	}
	baseG := runtime.NumGoroutine()
	baseHeap := liveHeap()
	start := time.Now()
	locks, err := take(ctx, rl, "hold", n, workers, ttl, false)
	if err != nil {
		return err
	}
	took := time.Since(start)
	perLock := float64(int64(liveHeap())-int64(baseHeap)) / float64(n)

	if prof != "" {
		f, err := os.Create(prof)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	cpu0 := cpuTime()
	t0 := time.Now()
	peakG := 0
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	end := time.After(hold)
	for waiting := true; waiting; {
		select {
		case <-end:
			waiting = false
		case <-tick.C:
			peakG = max(peakG, runtime.NumGoroutine())
		}
	}
	cores := (cpuTime() - cpu0).Seconds() / time.Since(t0).Seconds()
	lost, minExt := 0, 1<<30
	var firstLost error
	for _, l := range locks {
		if err := l.Err(); err != nil {
			if lost++; lost == 1 {
				firstLost = err
			}
		}
		minExt = min(minExt, l.Extensions())
	}
	fmt.Printf("| measure | value |\n|---|---|\n")
	fmt.Printf("| locks held, TTL, hold | %d, %v, %v |\n", n, ttl, hold)
	fmt.Printf("| taking them from %d goroutines (TryLock + AutoExtend) | %.0f locks/s |\n", workers, float64(n)/took.Seconds())
	fmt.Printf("| goroutines while holding | %d before, peak %d (growth %d) |\n", baseG, peakG, peakG-baseG)
	fmt.Printf("| heap per held auto-extended lock | %.0f B |\n", perLock)
	fmt.Printf("| client CPU while holding | %.3f core |\n", cores)
	fmt.Printf("| locks lost | %d |\n", lost)
	if firstLost != nil {
		fmt.Fprintf(os.Stderr, "first lost: %v\n", firstLost)
	}
	fmt.Printf("| fewest extensions of a lock | %d |\n", minExt)
	fmt.Printf("| machine | %d CPUs, %s |\n", runtime.NumCPU(), runtime.Version())
	release(locks, workers)
	return nil
}

// take takes n locks from workers goroutines, each auto-extended as soon
// as it is taken; with rel, it unlocks them again at once instead.
func take(ctx context.Context, rl *redlock.Client, prefix string, n, workers int, ttl time.Duration, rel bool) ([]*redlock.Lock, error) {
	locks := make([]*redlock.Lock, n)
	err := parallel(n, workers, func(i int) error {
		var l *redlock.Lock
		var err error
		for try := 0; try < 5; try++ {
			if l, err = rl.TryLock(ctx, fmt.Sprintf("%s-%d", prefix, i), ttl); err == nil {
				break
			}
		}
		if err == nil && !rel {
			err = l.AutoExtend(ctx) // at once: a lock taken early must not expire while the others are taken
		}
		locks[i] = l
		return err
	})
	if err != nil {
		return nil, err
	}
	if rel {
		release(locks, workers)
	}
	return locks, nil
}

func release(locks []*redlock.Lock, workers int) {
	_ = parallel(len(locks), workers, func(i int) error {
		_ = locks[i].Unlock(context.Background())
		return nil
	})
}

// parallel runs f(0) .. f(n-1) on workers goroutines; a worker stops at
// its first error, and the first error is returned.
func parallel(n, workers int, f func(i int) error) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	var first atomic.Value
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := f(i); err != nil {
					first.CompareAndSwap(nil, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	err, _ := first.Load().(error)
	return err
}

func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// cpuTime is this process's user + system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
