package node

import (
	"runtime"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestConnSlots: the leaders of all Clients sharing a go-redis pool hold
// at most a quarter of it (at least one connection). A client's slots
// are shared with its WithTimeout clones (same pool) and with clients of
// the same address and pool size; a client of another address has its
// own.
func TestConnSlots(t *testing.T) {
	for pool, want := range map[int]int32{1: 1, 4: 1, 7: 1, 8: 2, 20: 5, 100: 25} {
		if got := ConnSlotsFor(&redis.Options{PoolSize: pool}); got != want {
			t.Errorf("PoolSize %d: want %d slots, got %d", pool, want, got)
		}
	}
	a := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", PoolSize: 8})
	b := redis.NewClient(&redis.Options{Addr: "127.0.0.1:2", PoolSize: 8})
	same := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", PoolSize: 8})
	defer a.Close()
	defer b.Close()
	defer same.Close()
	sa := ConnSlotsOf(a)
	if ConnSlotsOf(a) != sa {
		t.Fatal("two slot tables for one client")
	}
	if ConnSlotsOf(a.WithTimeout(time.Second)) != sa {
		t.Fatal("a WithTimeout clone (same pool) has slots of its own")
	}
	if ConnSlotsOf(same) != sa {
		t.Fatal("a client of the same address and pool size has slots of its own")
	}
	if ConnSlotsOf(b) == sa {
		t.Fatal("clients of two addresses share a slot table")
	}
	for i := 1; i <= 2; i++ {
		if !sa.take() {
			t.Fatalf("want 2 slots of a pool of 8, got %d", i-1)
		}
	}
	if sa.take() {
		t.Fatal("a third slot of a pool of 8")
	}
	if !ConnSlotsOf(b).take() {
		t.Fatal("another client's slots taken by the first's leaders")
	}
	sa.give()
	if !sa.take() {
		t.Fatal("a slot given back was not free again")
	}
}

// TestConnSlotsTableShrinks: the process-wide slot table drops the
// entries of go-redis clients that were closed and collected, and the
// shared slots of their address once the last of them went.
func TestConnSlotsTableShrinks(t *testing.T) {
	slotsMu.Lock()
	before := len(slotsTab)
	slotsMu.Unlock()
	for range 500 {
		rc := redis.NewClient(&redis.Options{Addr: "127.0.0.1:3", PoolSize: 8})
		ConnSlotsOf(rc)
		_ = rc.Close()
	}
	var n int
	shared := true
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		runtime.GC()
		slotsMu.Lock()
		n = len(slotsTab)
		_, shared = slotsBy[slotsKey{addr: "127.0.0.1:3", pool: 8}]
		slotsMu.Unlock()
		if n <= before+10 && !shared {
			break
		}
	}
	if shared {
		t.Error("the shared slots of an address outlived its last client")
	}
	t.Logf("table: %d entries before, %d after", before, n)
	if n > before+10 {
		t.Errorf("slot table kept %d of 500 entries of closed, unreachable clients", n-before)
	}
}
