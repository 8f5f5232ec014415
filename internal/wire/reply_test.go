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
