package chaos

import (
	"fmt"
	"slices"
	"sort"
	"strings"
)

// The checker's rules for the lock family: folder locks (ModePath), which
// exclude related paths, and semaphore permits (ModePermit), at most
// Limit at once. Read locks are in Overlaps: they are locks of a key.

// PathOverlaps returns one violation per pair of path sections (ModePath)
// on related paths, the same path, an ancestor or a descendant by whole
// "/"-separated components, whose safe windows overlap (half-open, as in
// Overlaps). "a/b" and "a/bc", "a/b-1" or the sibling "a/c" are not
// related; "a/b" and "a/b/c" or "/a/" and "a" are. The violation's Key is
// the outer path.
func PathOverlaps(secs []Section) []Violation {
	comps := make(map[int][]string)
	// Related paths share their first component: group by it.
	roots, byRoot := groupByKey(secs, func(s Section) (string, bool) {
		return pathComponents(s.Key)[0], s.Mode == ModePath && s.End() > s.Acquired
	})
	var out []Violation
	for _, r := range roots {
		idx := byRoot[r]
		for _, i := range idx {
			comps[i] = pathComponents(secs[i].Key)
		}
		sort.SliceStable(idx, func(a, b int) bool { return secs[idx[a]].Acquired < secs[idx[b]].Acquired })
		var active []int
		for _, j := range idx {
			b := secs[j]
			active = slices.DeleteFunc(active, func(i int) bool { return secs[i].End() <= b.Acquired })
			for _, i := range active {
				outer, ok := relatedPaths(comps[i], comps[j])
				if !ok {
					continue
				}
				out = append(out, Violation{
					Kind: Overlap, Key: strings.Join(outer, "/"), A: i, B: j,
					Detail: overlapDetail(secs[i], b, 0, "client"),
				})
			}
			active = append(active, j)
		}
	}
	return out
}

// pathComponents normalizes path as the library does (one leading and one
// trailing "/" dropped) and splits it into its components.
func pathComponents(path string) []string {
	return strings.Split(strings.TrimSuffix(strings.TrimPrefix(path, "/"), "/"), "/")
}

// relatedPaths reports whether one of x and y is the other or an ancestor
// of it, component by component, and returns the outer one.
func relatedPaths(x, y []string) (outer []string, ok bool) {
	if len(x) > len(y) {
		x, y = y, x
	}
	return x, slices.Equal(x, y[:len(x)])
}

// OverLimits returns a violation for every permit section (ModePermit)
// whose acquisition made more permits of its semaphore overlap than the
// semaphore's limit: the smallest Limit among its sections, and 1 for a
// Limit below 1 (every user of a semaphore must pass the same limit).
// Windows are half-open, as in Overlaps, and the most permits overlap at
// the start of one of them, so checking each start is enough.
func OverLimits(secs []Section) []Violation {
	keys, byKey := groupByKey(secs, func(s Section) (string, bool) {
		return s.Key, s.Mode == ModePermit && s.End() > s.Acquired
	})
	var out []Violation
	for _, k := range keys {
		idx := byKey[k]
		limit := 0
		for _, i := range idx {
			if l := max(secs[i].Limit, 1); limit == 0 || l < limit {
				limit = l
			}
		}
		sort.SliceStable(idx, func(a, b int) bool { return secs[idx[a]].Acquired < secs[idx[b]].Acquired })
		var active []int
		for _, j := range idx {
			b := secs[j]
			active = slices.DeleteFunc(active, func(i int) bool { return secs[i].End() <= b.Acquired })
			if len(active) >= limit {
				first := active[0] // the one held with b that ends first
				clients := make([]string, 0, len(active)+1)
				for _, i := range active {
					if secs[i].End() < secs[first].End() {
						first = i
					}
					clients = append(clients, fmt.Sprint(secs[i].Client))
				}
				clients = append(clients, fmt.Sprint(b.Client))
				out = append(out, Violation{
					Kind: OverLimit, Key: k, A: first, B: j,
					Detail: fmt.Sprintf("%d permits held at %s, limit %d (clients %s): client %d's [%s, %s] went over",
						len(active)+1, ms(b.Acquired), limit, strings.Join(clients, ", "), b.Client, ms(b.Acquired), ms(b.End())),
				})
			}
			active = append(active, j)
		}
	}
	return out
}
