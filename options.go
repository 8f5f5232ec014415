package redlock

import (
	"log/slog"
	"strings"
	"time"

	"github.com/seed543a70bd/redlock/internal/wire"
)

// Defaults of the options. They are applied by New and can be overridden
// per client (New) or per call (TryLock, Lock, ...).
const (
	// defaultRetryDelay is the mean delay between attempts of Lock. Each
	// delay is drawn uniformly from [d/2, 3d/2) so that contenders do not
	// split the votes in lock-step.
	defaultRetryDelay = 50 * time.Millisecond
)

// config holds every setting; one copy per Client, copied again for a
// call that passes options.
type config struct {
	driftFactor float64
	nodeTimeout time.Duration // 0: derived from the TTL, see DefaultNodeTimeout
	retryDelay  time.Duration
	maxTries    int    // 0: no limit (until ctx is done)
	token       string // "": random per call
	meta        string // WithMetadata; "": none

	maxExtensions int           // 0: no limit
	maxHold       time.Duration // 0: no limit
	fencing       bool          // WithFencing
	restartGuard  time.Duration // WithRestartGuard; 0: off
	replicas      int           // WithReplicas; 0: off
	replicaWait   time.Duration // WithReplicas's timeout
	noHandoff     bool          // WithHandoff(false)
	prefix        string        // WithKeyPrefix; client-wide
	obs           func(Event)   // WithObserver; nil: none
	log           *slog.Logger  // WithLogger; nil: silent
	err           error
}

// defaultConfig returns the defaults: drift factor 0.01, retry delay
// 50ms, node timeout from the TTL, no retry bound, no hold limits, no
// fencing, no restart guard, pub/sub hand-off on, no key prefix, no
// observer, no logging.
func defaultConfig() config {
	return config{
		driftFactor: defaultDriftFactor,
		retryDelay:  defaultRetryDelay,
	}
}

// apply applies a Client's options.
func (c *config) apply(opts []Option) error {
	for _, o := range opts {
		if o == nil {
			return invalidf("nil Option")
		}
		o.applyClient(c)
		if c.err != nil {
			return c.err
		}
	}
	return nil
}

// applyCall applies a call's options.
func (c *config) applyCall(opts []LockOption) error {
	for _, o := range opts {
		if o == nil {
			return invalidf("nil LockOption")
		}
		o.applyCall(c)
		if c.err != nil {
			return c.err
		}
	}
	return nil
}

// timeoutFor returns the per-node timeout for a lease of ttl.
func (c *config) timeoutFor(ttl time.Duration) time.Duration {
	if c.nodeTimeout > 0 {
		return c.nodeTimeout
	}
	return DefaultNodeTimeout(ttl)
}

// Option configures a Client: it is given to New, Dial or NewMultiLock.
// The options of the client as a whole (WithKeyPrefix, WithRestartGuard)
// are Options only, so that a call cannot be given one.
type Option interface{ applyClient(*config) }

// LockOption configures one call: an acquisition (TryLock, Lock and
// their variants, Do), Campaign, Run or Inspect. WithToken is a
// LockOption only, so that a Client cannot be given one.
type LockOption interface{ applyCall(*config) }

// SharedOption is an option that both a Client and a call accept: given
// to New it is the default of every call, given to a call it overrides
// that default for the call.
type SharedOption interface {
	Option
	LockOption
}

// The option kinds, by scope.
type (
	clientOpt func(*config)
	callOpt   func(*config)
	sharedOpt func(*config)
)

func (f clientOpt) applyClient(c *config) { f(c) }
func (f callOpt) applyCall(c *config)     { f(c) }
func (f sharedOpt) applyClient(c *config) { f(c) }
func (f sharedOpt) applyCall(c *config)   { f(c) }

var (
	_ Option       = clientOpt(nil)
	_ LockOption   = callOpt(nil)
	_ SharedOption = sharedOpt(nil)
)

// WithDriftFactor sets the share of the TTL allowed for clock drift
// between this process and the nodes: drift = ttl*f + 2ms, and a lock is
// valid for ttl - elapsed - drift. Default: 0.01.
// f must be in [0, 0.5), else New or the call returns an error matching
// ErrInvalid.
func WithDriftFactor(f float64) SharedOption {
	return sharedOpt(func(c *config) {
		if !(f >= 0 && f < 0.5) {
			c.err = invalidf("drift factor %v outside [0, 0.5)", f)
			return
		}
		c.driftFactor = f
	})
}

// firstContactTimeout is how long a Client's first round waits for its
// nodes when that is longer than the per-node timeout: a first contact
// dials (TCP, TLS, AUTH) and identifies the server (INFO), which a
// per-node timeout of a few milliseconds would not allow on a loaded
// machine. Later rounds wait for the per-node timeout only.
const firstContactTimeout = 250 * time.Millisecond

// releaseTimeout is how long Unlock waits for its nodes when that is
// longer than the per-node timeout. A release does not spend the lock's
// validity, so a short stall (a GC pause, a busy node) should not turn a
// release that succeeds a moment later into ErrNotHeld. Unlock still
// returns as soon as a quorum has released.
const releaseTimeout = 250 * time.Millisecond

// WithNodeTimeout bounds how long a round (acquire, extend, release)
// waits for each node, whether or not the go-redis client honours context
// deadlines: a node that has not answered by then counts as failed. Its
// request runs on, and a late grant of a lost round is released. A
// Client's first round and an Unlock wait at least 250ms. A request that
// finds a node's queue (4096) full waits for room within this timeout; a
// node silent for the whole timeout fails it at once.
//
// Default: ttl/20 clamped to [5ms, 200ms] (DefaultNodeTimeout). d must be
// positive, else ErrInvalid. Details: docs/api.md#withnodetimeout.
func WithNodeTimeout(d time.Duration) SharedOption {
	return sharedOpt(func(c *config) {
		if d <= 0 {
			c.err = invalidf("node timeout %v is not positive", d)
			return
		}
		c.nodeTimeout = d
	})
}

// WithRetryDelay sets the mean delay between attempts of Lock; each delay
// is drawn uniformly from [d/2, 3d/2). Default: 50ms.
// d must be positive, else ErrInvalid.
func WithRetryDelay(d time.Duration) SharedOption {
	return sharedOpt(func(c *config) {
		if d <= 0 {
			c.err = invalidf("retry delay %v is not positive", d)
			return
		}
		c.retryDelay = d
	})
}

// WithMaxTries bounds the number of attempts Lock makes before it returns
// the last attempt's error. Default: 0, no bound: Lock retries until it
// wins or ctx is done, so give it a ctx with a deadline. n must not be
// negative, else ErrInvalid.
func WithMaxTries(n int) SharedOption {
	return sharedOpt(func(c *config) {
		if n < 0 {
			c.err = invalidf("max tries %d is negative", n)
			return
		}
		c.maxTries = n
	})
}

// minTokenLen is the shortest token WithToken accepts.
const minTokenLen = 16

// WithToken makes a TryLock store token on each node instead of 128 fresh
// random bits, so that a holder that persisted it can take its lock back
// after a restart (acquiring again with the same token is idempotent).
// The token must be unique to its holder, at least 16 bytes, without a
// NUL byte or the prefix "redlock:", else ErrInvalid; a call that
// retries (Lock) refuses it with ErrInvalid. Failed releases of such a
// lock are not retried in the background. Default: a random token per
// attempt. Details: docs/api.md#withtoken.
func WithToken(token string) LockOption {
	return callOpt(func(c *config) {
		if len(token) < minTokenLen {
			c.err = invalidf("token of %d bytes is shorter than %d", len(token), minTokenLen)
			return
		}
		if strings.Contains(token, wire.MetaSep) {
			c.err = invalidf("token %q contains a NUL byte, which separates a token from its metadata on the nodes", token)
			return
		}
		if strings.HasPrefix(token, reservedPrefix) {
			c.err = invalidf("token %q begins with %q, which marks the library's own values (read locks, semaphore limits)", token, reservedPrefix)
			return
		}
		c.token = token
	})
}

// maxMetadata is the most bytes of metadata WithMetadata accepts.
const maxMetadata = 4096

// WithMetadata stores meta with the lock on each node, for anyone who
// asks who holds it (Client.Inspect, and the error of an acquisition
// that lost to contention): a host, a pid, a job id, a start time. Any
// bytes, at most 4096, else ErrInvalid. It lives and dies
// with the lock: it is part of the value the lock stores (after its
// token and a NUL byte), so Extend and auto-extension keep it, Unlock
// removes it, and it expires with the key; no other key is written. A
// read lock or a semaphore permit stores it in its member, a path lock
// in its holder key. Given to New it is the default of every lock of the
// Client; given to a call it replaces that default. Default: "", none.
func WithMetadata(meta string) SharedOption {
	return sharedOpt(func(c *config) {
		if len(meta) > maxMetadata {
			c.err = invalidf("metadata of %d bytes is longer than %d", len(meta), maxMetadata)
			return
		}
		c.meta = meta
	})
}

// withMeta sets the metadata without WithMetadata's bound: an election's
// holds its term as well as a value of up to maxMetadata bytes.
func withMeta(meta string) LockOption {
	return callOpt(func(c *config) { c.meta = meta })
}

// WithMaxExtensions caps the number of extensions that auto-extension
// (AutoExtend, Do) makes; after the last one the lock lives out its
// validity and Done closes with ErrLockLost and ErrHoldLimit. The Redlock
// spec advises such a limit. Default: 0, no limit. n must not be
// negative, else ErrInvalid.
func WithMaxExtensions(n int) SharedOption {
	return sharedOpt(func(c *config) {
		if n < 0 {
			c.err = invalidf("max extensions %d is negative", n)
			return
		}
		c.maxExtensions = n
	})
}

// WithMaxHold caps how long auto-extension (AutoExtend, Do) keeps a lock:
// no extension is made that would carry the lock past d after it was
// acquired. Default: 0, no limit. d must not be negative, else
// ErrInvalid.
func WithMaxHold(d time.Duration) SharedOption {
	return sharedOpt(func(c *config) {
		if d < 0 {
			c.err = invalidf("max hold %v is negative", d)
			return
		}
		c.maxHold = d
	})
}

// WithFencing makes every acquisition also issue a fencing token,
// returned by (*Lock).Fence: for successive holders of one key the tokens
// strictly increase, as long as no node loses its data (see fence.go and
// the README). Each node keeps a counter per key, KeyName("fence", key), that
// never expires. The acquire round raises the counters; when the winning
// quorum's counters differ (after a node missed acquisitions), a second
// round raises them on a quorum, so TryLock may then take up to twice the
// per-node timeout. If that round fails the lock is released and the
// error matches ErrNotObtained. Default: off (Fence returns 0).
func WithFencing() SharedOption {
	return sharedOpt(func(c *config) { c.fencing = true })
}

// WithRestartGuard makes a node that restarted less than d ago a failed
// vote in acquisitions and extensions: the delayed restart the Redlock
// spec asks of nodes that do not fsync every write. A restart shows as a
// changed run_id or an uptime below d, read with INFO at first contact and
// after every new connection. Choose d at least your largest TTL.
//
// It needs *redis.Client nodes used directly (not WithTimeout clones) and
// an ACL that allows INFO. Default: 0, off. Errors from New: ErrInvalid
// when d is negative or a node cannot be guarded; the error names the
// node. Details: docs/api.md#withrestartguard.
func WithRestartGuard(d time.Duration) Option {
	return clientOpt(func(c *config) {
		if d < 0 {
			c.err = invalidf("restart guard %v is negative", d)
			return
		}
		c.restartGuard = d
	})
}

// WithReplicas makes every write of a lock's state on a node (a grant,
// an extension, a fence or leadership write) wait for n of that node's
// replicas to acknowledge it, for up to timeout (WAIT, in the write's
// pipeline). A node whose write reached fewer does not count towards the
// round's quorum; a lost attempt releases it as usual. It narrows the
// window in which a failover forgets a lock; WAIT is not consensus
// (docs/sentinel.md). Releases do not wait.
//
// Default: 0, off. ErrInvalid from New and Dial for n < 0, for n > 0
// with timeout <= 0 or not below a node's go-redis ReadTimeout, and for
// a Cluster client or a Ring. Details: docs/api.md#withreplicas.
func WithReplicas(n int, timeout time.Duration) Option {
	return clientOpt(func(c *config) {
		switch {
		case n < 0:
			c.err = invalidf("WithReplicas: %d replicas is negative", n)
			return
		case n > 0 && timeout <= 0:
			c.err = invalidf("WithReplicas: timeout %v is not positive", timeout)
			return
		}
		c.replicas, c.replicaWait = n, timeout
	})
}

// WithHandoff turns the pub/sub hand-off of Lock on or off. When on, a
// Lock call that finds the key held subscribes (one pattern subscription
// per node, shared by the Client's waiting calls and closed when none
// waits) and retries as soon as Unlock announces the release on
// KeyName("release", key), instead of sleeping out its retry delay; the
// jittered delay remains the fallback, as messages can be lost (a lock
// that expires is not announced). A waiting call whose own Client
// releases the key is woken in process, as soon as the release is sent,
// with no message. Default: on. Turn it off to spare the
// extra connection per node while waiting.
func WithHandoff(on bool) SharedOption {
	return sharedOpt(func(c *config) { c.noHandoff = !on })
}

// WithObserver makes the library report what it does to fn: every node
// request, every round and the end of every lock (see Event, and
// docs/observability.md for metric names). fn is called synchronously
// on the calling goroutine (or a node's request goroutine, or that of an
// Unlock handing the key to the call, Lock.Unlock): it must be
// fast and safe for concurrent use, and a panic in it is not recovered.
// Given to New it applies to every call of the Client; given to a single
// call, to that call's rounds and to the Lock it returns. nil turns
// observation off. Default: none, and then observation costs one nil
// check per event.
func WithObserver(fn func(Event)) SharedOption {
	return sharedOpt(func(c *config) { c.obs = fn })
}

// WithLogger makes the library log the few events worth a line to l: a
// lost lock (Warn), a node whose votes the restart guard starts or stops
// refusing (Info), one server given twice (Error), a failed clean-up
// release of a lost attempt (Debug), and, given to New or Dial, the
// configurations that weaken safety (Warn, one line per finding; see
// Client.Health). Nothing is logged per round or per request. Default:
// nil, silent (slog.Default is not used). Given to a single call it
// applies to that call's rounds and Lock; a duplicate node is logged with
// the Client's logger. go-redis's own log lines (a failed dial) go to its
// process-wide logger: see docs/operations.md.
func WithLogger(l *slog.Logger) SharedOption {
	return sharedOpt(func(c *config) { c.log = l })
}

// WithKeyPrefix puts p in front of every key and channel the library
// touches, so that applications can share nodes under ACL users confined
// to their prefix (docs/security.md has the ACL). Everything the API
// returns or reports names keys as the caller gave them; only the nodes
// see p+key. A Client's option only, since Extend, Unlock and the
// release subscriptions must agree on it.
//
// p must not contain "{" or "}" (it would change the keys' Redis Cluster
// slot), else ErrInvalid. Default: "", no prefix. Details:
// docs/api.md#withkeyprefix.
func WithKeyPrefix(p string) Option {
	return clientOpt(func(c *config) {
		if strings.ContainsAny(p, "{}") {
			c.err = invalidf("key prefix %q contains a hash tag brace", p)
			return
		}
		c.prefix = p
	})
}
