package chaos

import (
	"context"
	"fmt"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/seed543a70bd/redlock"
)

// Resource is the resource the locks protect: a store that accepts a
// write only with a fencing token larger than every token it accepted
// before for that key (Kleppmann's fenced storage), so that a holder
// whose lock has expired cannot overwrite a later holder's data.
type Resource interface {
	// Write stores value at key when fence is larger than every fence
	// accepted for key, else returns an error matching
	// redlock.ErrStaleFence.
	Write(ctx context.Context, key string, fence int64, value string) error
}

// StoreResource is a Resource on one Redis server, through
// redlock.FencedSet: the library's own fenced write. That server is not
// one of the lock's nodes and no fault touches it.
type StoreResource struct{ c redis.Scripter }

var _ Resource = (*StoreResource)(nil)

// NewStoreResource returns a Resource on c.
func NewStoreResource(c redis.Scripter) *StoreResource { return &StoreResource{c: c} }

// Write calls redlock.FencedSet.
func (s *StoreResource) Write(ctx context.Context, key string, fence int64, value string) error {
	return redlock.FencedSet(ctx, s.c, key, fence, value)
}

// MemResource is an in-process Resource, for tests and for runs that
// should not depend on FencedSet.
type MemResource struct {
	mu   sync.Mutex
	last map[string]int64
	val  map[string]string
}

var _ Resource = (*MemResource)(nil)

// Write stores value when fence is larger than key's last accepted fence.
func (m *MemResource) Write(ctx context.Context, key string, fence int64, value string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.last == nil {
		m.last, m.val = map[string]int64{}, map[string]string{}
	}
	if last, ok := m.last[key]; ok && fence <= last {
		return fmt.Errorf("%w: %d <= %d", redlock.ErrStaleFence, fence, last)
	}
	m.last[key], m.val[key] = fence, value
	return nil
}

// Value returns the value last accepted for key.
func (m *MemResource) Value(key string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.val[key]
}
