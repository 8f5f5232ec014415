package redlock

import (
	"context"
	"strings"
	"time"

	"github.com/seed543a70bd/redlock/internal/wire"
)

// Leader election, in the style of etcd's concurrency.Election.
//
// An election is a fenced lock on electionKey(name) whose metadata is the
// leader's term and value, "term 17: host-a": Campaign is Lock (with
// WithFencing), then a rewrite of its metadata with its term, which only
// the winner knows (a node's counter may differ from it: a node that
// granted late, or to a candidate that lost, counted on its own), so
// that Leader reports the term the leader fences with. Until that
// rewrite the metadata says "term 0": a leader being elected, which
// Leader does not report. Then the leadership is auto-extended
// on the Client's scheduler, and Resign
// is Unlock, whose release announcement wakes the waiting candidates
// (pub/sub hand-off). The term is the lock's fencing token, so it
// strictly increases from one leader to the next while no node loses its
// data (see WithRestartGuard), and a resource can refuse a deposed
// leader's writes with FencedSet. Proclaim rewrites the value in place,
// keeping the token and the TTL (key/proclaim.lua). Leader reads the
// key as Inspect does.
//
// Each publication of a leadership (Campaign's, then each Proclaim's)
// also goes, in the same script and only where the node holds the
// leadership, into the election's history on that node
// (KeyName("terms", name)), scored by its term and ordered within a term by a
// sequence number. Observe reads the history, so that a leadership
// begun and ended between two of its reads is still delivered.

// electionHistoryLen is how many entries each node's history of an
// election keeps (the highest): an observer that falls further behind
// skips the oldest.
const electionHistoryLen = 64

// electionHistoryTTL is how long an election's history lives after its
// last write, for a leadership of ttl: long against observePoll, so that
// an observer reads an entry before it expires, and bounded, so that an
// idle election leaves nothing behind for ever.
func electionHistoryTTL(ttl time.Duration) time.Duration {
	return max(10*ttl, time.Minute)
}

// Election is a leader election among the users of one name: at most one
// leader at a time, with a term that increases from leader to leader. It
// is a value that does no I/O until called; it is safe for concurrent
// use. Methods on a nil *Election return an error matching ErrInvalid
// (Observe, a closed channel).
type Election struct {
	c    *Client
	name string
}

// Election returns the election called name. It does no I/O. Its key is
// KeyName("election", name), with the key prefix (WithKeyPrefix) in front, so an
// election never collides with a lock on name. A name may not be empty
// or end with ":fence" or ":terms": its key would be another election's
// fence counter or history (KeyName("terms", name)); Campaign, Leader and Run
// return an error matching ErrInvalid for it, and Observe a closed
// channel.
func (c *Client) Election(name string) *Election {
	return &Election{c: c, name: name}
}

func (e *Election) check() error {
	switch {
	case e == nil:
		return invalidf("nil *Election")
	case e.c == nil:
		return invalidf("zero Election (not returned by Client.Election)")
	case e.name == "":
		return invalidf("empty election name")
	case strings.HasSuffix(e.name, ":fence"), strings.HasSuffix(e.name, termsSuffix):
		return invalidf("election name %q ends with %q: its key would be another election's fence counter or history", e.name, e.name[strings.LastIndexByte(e.name, ':'):])
	}
	return nil
}

// Campaign waits until it is elected leader with value, then returns the
// leadership, auto-extended by ttl until Resign or loss. Candidates wait
// as Lock waits; ctx bounds only the wait, as in etcd. value (at most
// 4096 bytes) is what Leader and Observe report. opts are Lock's; an
// election is always fenced, and WithMetadata and WithToken are refused.
//
// Errors: ErrInvalid for a nil or zero *Election, a nil ctx, a long
// value, a bad ttl or option; ErrClosed after Close; when ctx ends the
// wait, ErrNotObtained with ctx.Err() and the last attempt's reason; at
// once, ErrNotObtained with a *QuorumError (Op "proclaim") when the nodes
// refuse to publish the term for good. Details: docs/api.md#electioncampaign.
func (e *Election) Campaign(ctx context.Context, value string, ttl time.Duration, opts ...LockOption) (*Leadership, error) {
	if err := e.check(); err != nil {
		return nil, err
	}
	if len(value) > maxMetadata {
		return nil, invalidf("election value of %d bytes is longer than %d", len(value), maxMetadata)
	}
	cfg, err := e.c.callConfig(opts)
	if err != nil {
		return nil, err
	}
	if cfg.meta != e.c.cfg.meta {
		return nil, invalidf("WithMetadata does not apply to Campaign: the value is the leader's metadata")
	}
	opts = append(opts[:len(opts):len(opts)], WithFencing(), withMeta(wire.ElectionMeta(0, 0, value)))
	var retry *time.Timer
	defer func() {
		if retry != nil {
			retry.Stop()
		}
	}()
	var published error // the last win's failure to publish
	for {
		l, err := e.c.Lock(ctx, electionKey(e.name), ttl, opts...)
		if err != nil {
			if cerr := ctx.Err(); cerr != nil && published != nil {
				return nil, e.publishFailed(published, cerr)
			}
			return nil, err
		}
		actx, cancel := context.WithCancel(context.Background())
		ld := &Leadership{e: e, l: l, cancel: cancel}
		err = l.AutoExtend(actx)
		if err == nil {
			// The term, which only the winner knows, goes on the nodes.
			err = ld.proclaim(context.WithoutCancel(ctx), value)
		}
		if err == nil {
			return ld, nil
		}
		// Lost between the win and now, or the term could not be
		// published: give the leadership back and campaign again.
		cancel()
		_ = l.Unlock(context.Background())
		if cerr := ctx.Err(); cerr != nil {
			return nil, e.publishFailed(err, cerr)
		}
		published = err
		if deniedByACL(err) || foreignBlocked(err) {
			// The nodes refuse the history's commands, or hold a value
			// none of our kinds writes at its key: every win would end
			// the same way.
			return nil, e.publishFailed(err, nil)
		}
		// Another attempt after the retry delay, as Lock's: at once, it
		// would win and fail again as fast as the nodes answer.
		d := jitter(cfg.retryDelay)
		if retry == nil {
			retry = time.NewTimer(d)
		} else {
			retry.Reset(d)
		}
		select {
		case <-retry.C:
		case <-ctx.Done():
			return nil, e.publishFailed(err, ctx.Err())
		}
	}
}

// publishFailed is Campaign's error when it won but could not publish
// the term (err), and gave up: because ctx ended (ctxErr) or because no
// retry can succeed. One line, matching ErrNotObtained, ctxErr and err's
// reasons; errors.As reaches err's *QuorumError.
func (e *Election) publishFailed(err, ctxErr error) error {
	errs := []error{ErrNotObtained}
	msg := "not obtained"
	if ctxErr != nil {
		errs = append(errs, ctxErr)
		msg += ": " + ctxErr.Error()
	}
	return causef(append(errs, err), "election %q: %s; elected, but the term could not be published: %s", e.name, msg, strings.TrimPrefix(err.Error(), "redlock: "))
}

// Run campaigns with value and, once elected, runs fn with a ctx that is
// cancelled when the leadership is lost. When fn returns:
//   - after the leadership was lost, Run campaigns again and runs fn
//     again once re-elected;
//   - while still leader, Run resigns and returns fn's result, nil or an
//     error.
//
// When Run's ctx ends, it resigns (if leader) and returns ctx's error.
// When fn panics, Run resigns and the panic goes on unchanged. ttl and
// opts are Campaign's.
//
// Errors: Campaign's (ErrInvalid for bad arguments, a nil fn), ctx's
// error, or fn's.
func (e *Election) Run(ctx context.Context, value string, ttl time.Duration, fn func(ctx context.Context) error, opts ...LockOption) error {
	if err := e.check(); err != nil {
		return err
	}
	if fn == nil {
		return invalidf("nil fn")
	}
	if ctx == nil {
		return invalidf("nil context")
	}
	for {
		ld, err := e.Campaign(ctx, value, ttl, opts...)
		if err != nil {
			if cerr := ctx.Err(); cerr != nil {
				return cerr
			}
			return err
		}
		err, lost := ld.run(ctx, fn)
		switch {
		case ctx.Err() != nil:
			_ = ld.Resign(context.WithoutCancel(ctx))
			return ctx.Err()
		case lost:
			_ = ld.Resign(context.WithoutCancel(ctx)) // releases what nodes may keep
			continue
		}
		_ = ld.Resign(context.WithoutCancel(ctx))
		return err
	}
}
