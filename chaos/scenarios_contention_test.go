package chaos

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestDeadGaps pins which namings of dead waiters the contention
// scenario measures: a waiter killed after the grant that followed its
// naming took its turn, and a naming of a waiter killed later does not
// hide an earlier dead waiter's gap (a run failed "unchecked" so).
func TestDeadGaps(t *testing.T) {
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	newRun := func(acquired ...int) *contention {
		rec := NewRecorder(NewClock())
		for _, a := range acquired {
			rec.Section(Section{Acquired: ms(a)})
		}
		return &contention{e: &env{rec: rec}, byID: map[string]*contender{}}
	}
	addDead := func(c *contention, id string, died int) {
		ct := &contender{died: ms(died)}
		ct.id.Store(&id)
		ct.dead.Store(true)
		c.all = append(c.all, ct)
	}
	addLive := func(c *contention, id string) {
		ct := &contender{}
		ct.id.Store(&id)
		c.all = append(c.all, ct)
	}

	t.Run("dead head then a waiter killed later", func(t *testing.T) {
		c := newRun(100, 684, 2000)
		addDead(c, "a", 506)  // killed at rank 0, named at 548
		addDead(c, "b", 1933) // named at 683, granted at 684, killed later
		c.namings = []naming{{ms(548), "a"}, {ms(683), "b"}}
		gaps, skipped := c.deadGaps()
		require.Equal(t, []deadGap{{ms(548), ms(684)}}, gaps, "skipped: %v", skipped)
	})
	t.Run("two dead in a row: one gap, the later", func(t *testing.T) {
		c := newRun(100, 900)
		addDead(c, "a", 500)
		addDead(c, "b", 510)
		c.namings = []naming{{ms(548), "a"}, {ms(700), "b"}}
		gaps, _ := c.deadGaps()
		require.Equal(t, []deadGap{{ms(700), ms(900)}}, gaps)
	})
	t.Run("granted before it died", func(t *testing.T) {
		c := newRun(100, 600)
		addDead(c, "a", 1000)
		addLive(c, "x")
		c.namings = []naming{{ms(590), "a"}, {ms(800), "x"}}
		gaps, skipped := c.deadGaps()
		require.Empty(t, gaps)
		require.Len(t, skipped, 1)
	})
	t.Run("a fault overlaps", func(t *testing.T) {
		c := newRun(100, 900)
		addDead(c, "a", 500)
		c.namings = []naming{{ms(548), "a"}}
		c.faults = []window{{from: ms(800), to: ms(1200)}}
		gaps, skipped := c.deadGaps()
		require.Empty(t, gaps)
		require.Len(t, skipped, 1)
	})
	t.Run("no grant yet", func(t *testing.T) {
		c := newRun(100)
		addDead(c, "a", 500)
		c.namings = []naming{{ms(548), "a"}}
		gaps, skipped := c.deadGaps()
		require.Empty(t, gaps)
		require.Len(t, skipped, 1)
	})
}
