package wire

import (
	"context"
	"errors"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/seed543a70bd/redlock/internal/redisnode"
)

// TestNodeErrorKinds: the server's refusals are told apart by their
// text, as go-redis returns them (a redis.Error): NOSCRIPT, WRONGTYPE,
// and an ACL refusal of a command sent (NOPERM) or run by a script, in
// the words of Redis 7.0 and of Valkey 8.
func TestNodeErrorKinds(t *testing.T) {
	for _, tc := range []struct {
		msg                       string
		noScript, wrongType, perm bool
	}{
		{"WRONGTYPE Operation against a key holding the wrong kind of value", false, true, false},
		{"NOPERM this user has no permissions to run the 'zadd' command", false, false, true},
		{"NOPERM User u has no permissions to run the 'zadd' command", false, false, true},
		{"ERR The user executing the script can't run this command or subcommand script: 1, on @user_script:4.", false, false, true},
		{"ERR ACL failure in script: User u has no permissions to run the 'zadd' command script: 1, on @user_script:4.", false, false, true},
		{"ERR unknown command", false, false, false},
		{"NOSCRIPT No matching script. Please use EVAL.", true, false, false},
		{"NOSCRIPT No matching script.", true, false, false},
	} {
		err := error(nodeError(tc.msg))
		if got := IsNoScript(err); got != tc.noScript {
			t.Errorf("IsNoScript(%q): want %v, got %v", tc.msg, tc.noScript, got)
		}
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

// TestNodeErrorKindsOnServer: the refusals TestNodeErrorKinds reads by
// their text are told apart as a real server words them: the one
// REDLOCK_SERVER chooses (redis-server by default; make test runs this
// package against valkey-server too).
func TestNodeErrorKindsOnServer(t *testing.T) {
	node, err := redisnode.Start(redisnode.Options{})
	if err != nil {
		t.Fatalf("starting the server: %v", err)
	}
	t.Cleanup(func() { _ = node.Close() })
	ctx := context.Background()
	admin := redis.NewClient(&redis.Options{Addr: node.Addr()})
	t.Cleanup(func() { _ = admin.Close() })
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(admin.Do(ctx, "ACL", "SETUSER", "nozadd", "on", ">pw", "~*", "+@all", "-zadd").Err())
	user := redis.NewClient(&redis.Options{Addr: node.Addr(), Username: "nozadd", Password: "pw"})
	t.Cleanup(func() { _ = user.Close() })
	must(admin.SAdd(ctx, "set", "m").Err())
	zadd := "return redis.call('zadd', KEYS[1], 1, 'm')"
	for _, tc := range []struct {
		name                      string
		call                      func() error
		noScript, wrongType, perm bool
	}{
		{"EVALSHA of a script the node lacks", func() error {
			return admin.EvalSha(ctx, "0123456789012345678901234567890123456789", []string{"k"}).Err()
		}, true, false, false},
		{"a script on a key of another type", func() error { return admin.Eval(ctx, zadd, []string{"set"}).Err() }, false, true, false},
		{"a command the ACL denies", func() error { return user.ZAdd(ctx, "z", redis.Z{Score: 1, Member: "m"}).Err() }, false, false, true},
		{"a script's command the ACL denies", func() error { return user.Eval(ctx, zadd, []string{"z"}).Err() }, false, false, true},
		{"an unknown command", func() error { return admin.Do(ctx, "NOSUCHCOMMAND").Err() }, false, false, false},
	} {
		err := tc.call()
		if err == nil {
			t.Errorf("%s: want an error, got none", tc.name)
			continue
		}
		if got := IsNoScript(err); got != tc.noScript {
			t.Errorf("%s: IsNoScript(%q): want %v, got %v", tc.name, err, tc.noScript, got)
		}
		if got := IsWrongType(err); got != tc.wrongType {
			t.Errorf("%s: IsWrongType(%q): want %v, got %v", tc.name, err, tc.wrongType, got)
		}
		if got := IsACLDenied(err); got != tc.perm {
			t.Errorf("%s: IsACLDenied(%q): want %v, got %v", tc.name, err, tc.perm, got)
		}
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
