package chaos

import "testing"

// TestQuorumBack pins where an outage's window ends: at the restart that
// brings a quorum back (a majority; every node for a MultiLock), not at
// the last victim's.
func TestQuorumBack(t *testing.T) {
	for _, tc := range []struct {
		n, still int
		multi    bool
		want     bool
	}{
		{5, 2, false, true},  // kill-majority: the first of three victims back
		{5, 3, false, false}, // only two of five up
		{5, 0, false, true},
		{3, 1, false, true},
		{3, 2, false, false},
		{5, 0, true, true}, // multilock-node-down: the victim back
		{5, 1, true, false},
	} {
		if got := quorumBack(tc.n, tc.still, tc.multi); got != tc.want {
			t.Errorf("quorumBack(%d, %d, %v): want %v, got %v", tc.n, tc.still, tc.multi, tc.want, got)
		}
	}
}
