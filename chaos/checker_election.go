package chaos

import (
	"fmt"
	"sort"
	"time"
)

// The checker's rules for leader elections (redlock.Election). A
// leadership is a Section of ModeLeader: Key is the election's key, Fence
// its term, Acquired the instant Campaign returned, and its window ends at
// the earlier of Done closing (or Resign) and the validity deadline.
// Overlaps finds two leaderships of one election valid at once, as it
// finds two holders of one key; TermOrder finds terms that did not rise
// in election order; FailoverAfter measures how long the election went
// without a leader after one died, for the scenario's bound.

// TermOrder returns a violation for every leadership (ModeLeader) whose
// term is not greater than the largest term of the leaderships of the
// same election elected before it, in the order of Acquired. Only
// leaderships that were valid for a while count: one whose window is
// empty (Campaign returned after its validity deadline) was never acted
// on. The violation's A is the earlier leadership with the larger (or
// equal) term, B the later one.
func TermOrder(secs []Section) []Violation {
	keys, byKey := groupByKey(secs, func(s Section) (string, bool) {
		return s.Key, s.Mode == ModeLeader && s.End() > s.Acquired
	})
	var out []Violation
	for _, k := range keys {
		idx := byKey[k]
		sort.SliceStable(idx, func(a, b int) bool { return secs[idx[a]].Acquired < secs[idx[b]].Acquired })
		best := -1 // the largest term elected so far
		for _, j := range idx {
			b := secs[j]
			if best >= 0 && b.Fence <= secs[best].Fence {
				a := secs[best]
				out = append(out, Violation{
					Kind: StaleTerm, Key: k, A: best, B: j,
					Detail: fmt.Sprintf("client %d was elected at %s with term %d, after client %d was elected at %s with term %d",
						b.Client, ms(b.Acquired), b.Fence, a.Client, ms(a.Acquired), a.Fence),
				})
			}
			if best < 0 || b.Fence > secs[best].Fence {
				best = j
			}
		}
	}
	return out
}

// FailoverAfter returns how long after at the next leader of the
// election whose key is key was elected: the earliest Acquired at or
// after at of a leadership (ModeLeader) of a client other than dead, the
// client whose leader died (paused, crashed) at at. A leadership that was
// never valid (Campaign returned after its deadline) elected no leader.
// ok is false when no such leadership was recorded.
func FailoverAfter(secs []Section, key string, dead int, at time.Duration) (d time.Duration, ok bool) {
	for _, s := range secs {
		if s.Mode != ModeLeader || s.Key != key || s.Client == dead || s.Acquired < at || s.End() <= s.Acquired {
			continue
		}
		if !ok || s.Acquired-at < d {
			d, ok = s.Acquired-at, true
		}
	}
	return d, ok
}
