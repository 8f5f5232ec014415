package redlock

// nodeSet is a set of node indexes: a bit mask for the first 64, a map
// beyond (rare: a client of more than 64 nodes).
type nodeSet struct {
	bits uint64
	more map[int]bool
}

func (s *nodeSet) add(i int) {
	if i < 64 {
		s.bits |= 1 << i
		return
	}
	if s.more == nil {
		s.more = make(map[int]bool)
	}
	s.more[i] = true
}

func (s *nodeSet) has(i int) bool {
	if i < 64 {
		return s.bits&(1<<i) != 0
	}
	return s.more[i]
}
