package chaos

import (
	"fmt"
	"sort"
	"time"
)

// The checker is pure: it reads a History and returns the safety
// violations in it. It knows nothing of Redis, so it is unit-tested on
// hand-made histories (checker_test.go), including ones that must fail.

// ViolationKind names a broken safety property.
type ViolationKind string

const (
	// Overlap: two holders of one key whose safe windows
	// [Acquired, min(Released, Deadline)] overlap.
	Overlap ViolationKind = "overlap"
	// StaleFence: the protected resource accepted a write whose fencing
	// token was not larger than one it had accepted before.
	StaleFence ViolationKind = "stale-fence"
	// OverLimit: more permits of one semaphore (ModePermit sections)
	// whose safe windows overlap at one instant than its Limit.
	OverLimit ViolationKind = "over-limit"
	// StaleTerm: a leader (ModeLeader section) elected with a term not
	// larger than that of a leader of the same election elected before.
	StaleTerm ViolationKind = "stale-term"
)

// Violation is one broken safety property.
type Violation struct {
	Kind ViolationKind `json:"kind"`
	Key  string        `json:"key"` // for two paths, the outer one
	// A and B index History.Sections (Overlap, OverLimit) or
	// History.Writes (StaleFence); A is the earlier one. For OverLimit,
	// B is the permit that went over the limit and A the permit held
	// with it that ended first.
	A      int    `json:"a"`
	B      int    `json:"b"`
	Detail string `json:"detail"`
}

// String describes the violation on one line.
func (v Violation) String() string {
	return fmt.Sprintf("%s on %q: %s", v.Kind, v.Key, v.Detail)
}

// Check returns every violation in h: overlapping safe windows of holds
// that exclude each other (Overlaps, PathOverlaps; two leaderships of one
// election are two such holds), more permits at once than a semaphore's
// limit (OverLimits), terms that did not rise in the order leaders were
// elected (TermOrder), and stale fenced writes that were accepted
// (StaleFences), in that order.
func Check(h History) []Violation {
	out := Overlaps(h.Sections)
	out = append(out, PathOverlaps(h.Sections)...)
	out = append(out, OverLimits(h.Sections)...)
	out = append(out, TermOrder(h.Sections)...)
	return append(out, StaleFences(h.Writes)...)
}

// Overlaps returns one violation per pair of sections of the same key
// that exclude each other and whose safe windows overlap: two exclusive
// locks (Mode "" or ModeWrite), an exclusive lock and a read lock, or two
// leaderships of one election (ModeLeader, whose Key is the election's
// key); read locks (ModeRead) share. Windows are half-open: a section that
// starts exactly when another ends does not overlap it. A window that is
// empty (the lock was returned after its deadline) overlaps nothing.
// Path and permit sections are not locks of a key: PathOverlaps and
// OverLimits check them.
func Overlaps(secs []Section) []Violation {
	keys, byKey := groupByKey(secs, func(s Section) (string, bool) {
		return s.Key, s.Mode != ModePath && s.Mode != ModePermit && s.End() > s.Acquired
	})
	var out []Violation
	for _, k := range keys {
		idx := byKey[k]
		sort.SliceStable(idx, func(a, b int) bool { return secs[idx[a]].Acquired < secs[idx[b]].Acquired })
		var active []int // sections whose window is still open, by start
		for _, j := range idx {
			b := secs[j]
			kept := active[:0]
			for _, i := range active {
				if secs[i].End() > b.Acquired {
					kept = append(kept, i)
				}
			}
			active = kept
			for _, i := range active {
				a := secs[i]
				if a.Mode == ModeRead && b.Mode == ModeRead {
					continue // readers share
				}
				out = append(out, Violation{
					Kind: Overlap, Key: k, A: i, B: j,
					Detail: overlapDetail(a, b, 0, "client"),
				})
			}
			active = append(active, j)
		}
	}
	return out
}

// groupByKey returns the indexes of the items that keyOf keeps, grouped
// by their key, and the keys in sorted order.
func groupByKey[T any](items []T, keyOf func(T) (key string, keep bool)) ([]string, map[string][]int) {
	byKey := map[string][]int{}
	var keys []string
	for i, it := range items {
		k, keep := keyOf(it)
		if !keep {
			continue
		}
		if _, ok := byKey[k]; !ok {
			keys = append(keys, k)
		}
		byKey[k] = append(byKey[k], i)
	}
	sort.Strings(keys)
	return keys, byKey
}

// overlapDetail describes the overlap of a and the later b, numbering
// clients from base (see TimelineOptions.OneBased) and calling them
// client (TimelineOptions.Client).
func overlapDetail(a, b Section, base int, client string) string {
	return fmt.Sprintf("%s %d held%s [%s, %s] and %s %d held%s [%s, %s]: %s together",
		client, a.Client+base, a.what(), ms(a.Acquired), ms(a.End()), client, b.Client+base, b.what(), ms(b.Acquired), ms(b.End()),
		ms(min(a.End(), b.End())-b.Acquired))
}

// what names what s held, for messages: nothing for an exclusive lock of
// a key, which is the message's key.
func (s Section) what() string {
	switch s.Mode {
	case ModeRead:
		return " a read lock"
	case ModePath:
		return fmt.Sprintf(" path %q", s.Key)
	case ModePermit:
		return " a permit"
	case ModeLeader:
		return fmt.Sprintf(" the leadership (term %d)", s.Fence)
	}
	return ""
}

// StaleFences returns the accepted writes whose fencing token was not
// larger than that of an accepted write to the same key that had
// finished before they started, and accepted writes that share one
// token with an overlapping accepted write. Writes that overlap in time
// may be ordered either way by the resource, so only real-time order
// counts for the first rule.
func StaleFences(ws []Write) []Violation {
	keys, byKey := groupByKey(ws, func(w Write) (string, bool) { return w.Key, w.Accepted })
	var out []Violation
	for _, k := range keys {
		byStart := byKey[k]
		sort.SliceStable(byStart, func(a, b int) bool { return ws[byStart[a]].Start < ws[byStart[b]].Start })
		byEnd := append([]int(nil), byStart...)
		sort.SliceStable(byEnd, func(a, b int) bool { return ws[byEnd[a]].End < ws[byEnd[b]].End })

		best, e := -1, 0 // best: the highest-fenced write finished so far
		for _, j := range byStart {
			b := ws[j]
			for ; e < len(byEnd) && ws[byEnd[e]].End < b.Start; e++ {
				if best < 0 || ws[byEnd[e]].Fence > ws[best].Fence {
					best = byEnd[e]
				}
			}
			if best >= 0 && b.Fence <= ws[best].Fence {
				a := ws[best]
				out = append(out, Violation{
					Kind: StaleFence, Key: k, A: best, B: j,
					Detail: fmt.Sprintf("client %d's write with fence %d accepted at %s after client %d's write with fence %d at %s",
						b.Client, b.Fence, ms(b.Start), a.Client, a.Fence, ms(a.End)),
				})
			}
		}
		// Equal tokens on writes that overlap in time, which the rule
		// above cannot order.
		for x, i := range byStart {
			for _, j := range byStart[x+1:] {
				a, b := ws[i], ws[j]
				if b.Start > a.End {
					break
				}
				if a.Fence == b.Fence && a.End >= b.Start {
					out = append(out, Violation{
						Kind: StaleFence, Key: k, A: i, B: j,
						Detail: fmt.Sprintf("clients %d and %d both had writes with fence %d accepted", a.Client, b.Client, a.Fence),
					})
				}
			}
		}
	}
	return out
}

// ms formats an instant or span in milliseconds.
func ms(d time.Duration) string {
	if d == Never {
		return "never"
	}
	return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond))
}
