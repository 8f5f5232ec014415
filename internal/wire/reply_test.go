package wire

import (
	"errors"
	"testing"

	"github.com/redis/go-redis/v9"
)

// TestNodeErrorKinds: the server's refusals are told apart by their
// text, as go-redis returns them (a redis.Error): WRONGTYPE, and an ACL
// refusal of a command sent (NOPERM) or run by a script.
func TestNodeErrorKinds(t *testing.T) {
	for _, tc := range []struct {
		msg             string
		wrongType, perm bool
	}{
		{"WRONGTYPE Operation against a key holding the wrong kind of value", true, false},
		{"NOPERM User u has no permissions to run the 'zadd' command", false, true},
		{"ERR The user executing the script can't run this command or subcommand script: 1, on @user_script:4.", false, true},
		{"ERR unknown command", false, false},
		{"NOSCRIPT No matching script", false, false},
	} {
		err := error(nodeError(tc.msg))
		if got := IsWrongType(err); got != tc.wrongType {
			t.Errorf("IsWrongType(%q): want %v, got %v", tc.msg, tc.wrongType, got)
		}
		if got := IsACLDenied(err); got != tc.perm {
			t.Errorf("IsACLDenied(%q): want %v, got %v", tc.msg, tc.perm, got)
		}
	}
	if IsACLDenied(errors.New("dial tcp: connection refused")) {
		t.Error("IsACLDenied(a dial error): want false")
	}
}

// nodeError is a reply error as go-redis returns it (a redis.Error).
type nodeError string

func (e nodeError) Error() string { return string(e) }
func (nodeError) RedisError()     {}

var _ redis.Error = nodeError("")

// TestHealedIsAbsent: an extension's "healed" (2, or 'h' in a batch) is
// StatusAbsent with Healed set: the node did not hold the lock and must
// not count towards the quorum. 2 from any other request is not a reply
// of ours.
func TestHealedIsAbsent(t *testing.T) {
	for _, k := range []Kind{KindKey, KindRead, KindPath, KindPermit} {
		r := Classify(&Request{Op: OpExtend, Kind: k}, int64(2))
		if r.St != StatusAbsent || !r.Healed {
			t.Errorf("kind %d: extend's 2: want absent and healed, got %+v", k, r)
		}
		if r := Classify(&Request{Op: OpExtend, Kind: k}, int64(1)); r.St != StatusOK || r.Healed {
			t.Errorf("kind %d: extend's 1: want ok, got %+v", k, r)
		}
	}
	for _, op := range []Op{OpAcquire, OpRelease, OpFence} {
		if r := Classify(&Request{Op: op}, int64(2)); r.St != StatusFailed || r.Healed {
			t.Errorf("%v's 2: want failed, got %+v", op, r)
		}
	}
	if r := BatchStatus("1h0t", 1); r.St != StatusAbsent || !r.Healed {
		t.Errorf("batch 'h': want absent and healed, got %+v", r)
	}
	if r := BatchStatus("1h0t", 2); r.St != StatusAbsent || r.Healed {
		t.Errorf("batch '0': want absent, got %+v", r)
	}
}
