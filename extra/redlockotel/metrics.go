package redlockotel

import (
	"context"
	"errors"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/seed543a70bd/redlock"
)

// buckets are the bucket boundaries, in seconds, that the duration
// histograms advise: a round takes about one network round trip, from
// well under a millisecond on a LAN to the per-node timeout.
var buckets = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}

// instruments are the Observer's metric instruments (see the package doc).
type instruments struct {
	roundDur   metric.Float64Histogram
	attempts   metric.Int64Counter
	extensions metric.Int64Counter
	held       metric.Int64UpDownCounter
	released   metric.Int64Counter
	lost       metric.Int64Counter
	holdDur    metric.Float64Histogram
	nodeDur    metric.Float64Histogram
	nodeErrs   metric.Int64Counter
}

// init creates the instruments on m. An instrument whose creation failed
// is still a usable no-op, as the API returns one with the error.
func (in *instruments) init(m metric.Meter) error {
	var errs []error
	check := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	var err error
	in.roundDur, err = m.Float64Histogram("redlock.round.duration", metric.WithUnit("s"),
		metric.WithDescription("Duration of redlock rounds (lock, extend, unlock, fence), from the first request to the decision."),
		metric.WithExplicitBucketBoundaries(buckets...))
	check(err)
	in.attempts, err = m.Int64Counter("redlock.acquire.attempts", metric.WithUnit("{attempt}"),
		metric.WithDescription("Lock acquisition attempts (lock rounds), by outcome."))
	check(err)
	in.extensions, err = m.Int64Counter("redlock.extensions", metric.WithUnit("{extension}"),
		metric.WithDescription("Successful lock extensions (Extend or auto-extension)."))
	check(err)
	in.held, err = m.Int64UpDownCounter("redlock.locks.held", metric.WithUnit("{lock}"),
		metric.WithDescription("Locks acquired and not yet released or lost."))
	check(err)
	in.released, err = m.Int64Counter("redlock.locks.released", metric.WithUnit("{lock}"),
		metric.WithDescription("Locks ended by Unlock."))
	check(err)
	in.lost, err = m.Int64Counter("redlock.locks.lost", metric.WithUnit("{lock}"),
		metric.WithDescription("Locks found lost while held."))
	check(err)
	in.holdDur, err = m.Float64Histogram("redlock.lock.hold.duration", metric.WithUnit("s"),
		metric.WithDescription("How long locks were held, from the acquiring round's start to their end."),
		metric.WithExplicitBucketBoundaries(buckets...))
	check(err)
	in.nodeDur, err = m.Float64Histogram("redlock.node.request.duration", metric.WithUnit("s"),
		metric.WithDescription("Latency of requests to one node, from the round's start to the reply."),
		metric.WithExplicitBucketBoundaries(buckets...))
	check(err)
	in.nodeErrs, err = m.Int64Counter("redlock.node.errors", metric.WithUnit("{error}"),
		metric.WithDescription("Failed requests to one node."))
	check(err)
	return errors.Join(errs...)
}

// metricCtx is the context to record with: the caller's, so that an SDK
// can link exemplars to its trace.
func metricCtx(ctx context.Context) context.Context {
	if ctx == nil {
		return context.Background()
	}
	return ctx
}

func (o *Observer) recordRound(e redlock.Event) {
	ctx := metricCtx(e.Ctx)
	won := e.Reason == "won"
	o.m.roundDur.Record(ctx, e.Duration.Seconds(), o.cache.round(string(e.Op), e.Reason))
	switch e.Op {
	case "lock":
		o.m.attempts.Add(ctx, 1, o.cache.round("", e.Reason))
		if won {
			o.m.held.Add(ctx, 1)
		}
	case "extend":
		if won {
			o.m.extensions.Add(ctx, 1)
		}
	case "fence":
		if !won {
			// The library undoes the lock round's win: no lock ends.
			o.m.held.Add(ctx, -1)
		}
	}
}

func (o *Observer) recordLock(e redlock.Event) {
	ctx := metricCtx(e.Ctx)
	o.m.held.Add(ctx, -1)
	if e.Lost {
		o.m.lost.Add(ctx, 1)
	} else {
		o.m.released.Add(ctx, 1)
	}
	o.m.holdDur.Record(ctx, e.Held.Seconds())
}

func (o *Observer) recordNode(e redlock.Event) {
	ctx := metricCtx(e.Ctx)
	opt := o.cache.node(string(e.Op), e.Node)
	o.m.nodeDur.Record(ctx, e.Latency.Seconds(), opt)
	if e.Status == "failed" {
		o.m.nodeErrs.Add(ctx, 1, opt)
	}
}

// attrCache keeps one attribute set per label combination, so that
// recording allocates nothing once a combination was seen. Ops, reasons
// and node indexes are few and bounded.
type attrCache struct {
	mu     sync.RWMutex
	rounds map[roundKey]metric.MeasurementOption
	nodes  map[nodeKey]metric.MeasurementOption
}

// roundKey is (op, reason); op "" is the reason alone (acquire.attempts).
type roundKey struct {
	op     string
	reason string
}

type nodeKey struct {
	op   string
	node int
}

func (c *attrCache) round(op string, r string) metric.MeasurementOption {
	k := roundKey{op, r}
	c.mu.RLock()
	opt, ok := c.rounds[k]
	c.mu.RUnlock()
	if ok {
		return opt
	}
	kv := []attribute.KeyValue{keyReason.String(string(r))}
	if op != "" {
		kv = append(kv, keyOp.String(op))
	}
	opt = metric.WithAttributeSet(attribute.NewSet(kv...))
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.rounds == nil {
		c.rounds = make(map[roundKey]metric.MeasurementOption)
	}
	c.rounds[k] = opt
	return opt
}

func (c *attrCache) node(op string, node int) metric.MeasurementOption {
	k := nodeKey{op, node}
	c.mu.RLock()
	opt, ok := c.nodes[k]
	c.mu.RUnlock()
	if ok {
		return opt
	}
	opt = metric.WithAttributeSet(attribute.NewSet(keyOp.String(op), keyNodeIndex.Int(node)))
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.nodes == nil {
		c.nodes = make(map[nodeKey]metric.MeasurementOption)
	}
	c.nodes[k] = opt
	return opt
}
