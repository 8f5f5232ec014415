package redlockotel

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/seed543a70bd/redlock"
)

// Attribute keys, shared by spans and metrics.
const (
	keyOp          = attribute.Key("redlock.op")
	keyKeys        = attribute.Key("redlock.keys")
	keyReason      = attribute.Key("redlock.reason")
	keyWon         = attribute.Key("redlock.won")
	keyErrorType   = attribute.Key("error.type")
	keyError       = attribute.Key("redlock.error")
	keyNodeIndex   = attribute.Key("redlock.node.index")
	keyNodeAddr    = attribute.Key("redlock.node.address")
	keyNodeStatus  = attribute.Key("redlock.node.status")
	keyNodeLatency = attribute.Key("redlock.node.latency")
	keyNodeError   = attribute.Key("redlock.node.error")
	keyHeld        = attribute.Key("redlock.lock.held")
	keyExtensions  = attribute.Key("redlock.lock.extensions")
)

// statuses are the node statuses a round counts, in the order of
// statusKeys.
var statuses = [...]string{"pending", "ok", "taken", "absent", "failed"}

// statusKeys are the per-status node counts of a round.
var statusKeys = [len(statuses)]attribute.Key{
	"redlock.nodes.pending",
	"redlock.nodes.ok",
	"redlock.nodes.taken",
	"redlock.nodes.absent",
	"redlock.nodes.failed",
}

// spanName names a round's span; constants for the known ops, so that
// naming allocates nothing.
func spanName(op string) string {
	switch op {
	case "lock":
		return "redlock.lock"
	case "extend":
		return "redlock.extend"
	case "unlock":
		return "redlock.unlock"
	case "fence":
		return "redlock.fence"
	}
	return "redlock." + string(op)
}

// isException reports whether a lost round is worth an exception event:
// not for contention or cancellation, which are ordinary outcomes.
func isException(r string) bool {
	return r != "contended" && r != "cancelled"
}

// traceRound makes the span of a decided round, after the fact: it
// starts at e.Start and ends at the decision.
func (o *Observer) traceRound(e redlock.Event) {
	ctx := e.Ctx
	if ctx == nil { // not per the contract; be lenient
		ctx = context.Background()
	}
	start := e.Start
	if start.IsZero() {
		start = time.Now().Add(-e.Duration)
	}
	end := start.Add(e.Duration)
	_, span := o.tracer.Start(ctx, spanName(e.Op),
		trace.WithTimestamp(start),
		trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(keyOp.String(string(e.Op)), keyKeys.StringSlice(e.Keys)),
	)
	if !span.IsRecording() {
		span.End(trace.WithTimestamp(end))
		return
	}
	won := e.Reason == "won"
	var counts [len(statusKeys)]int
	for _, n := range e.Nodes {
		for i, st := range statuses {
			if n.Status == st {
				counts[i]++
				break
			}
		}
	}
	attrs := make([]attribute.KeyValue, 0, 3+len(statusKeys))
	attrs = append(attrs, keyReason.String(string(e.Reason)), keyWon.Bool(won))
	for st, k := range statusKeys {
		attrs = append(attrs, k.Int(counts[st]))
	}
	if !won {
		attrs = append(attrs, keyErrorType.String(string(e.Reason)))
	}
	span.SetAttributes(attrs...)

	for _, n := range e.Nodes {
		at := end
		if n.Status != "pending" && n.Latency > 0 && n.Latency <= e.Duration {
			at = start.Add(n.Latency)
		}
		na := []attribute.KeyValue{
			keyNodeIndex.Int(n.Node),
			keyNodeAddr.String(n.Addr),
			keyNodeStatus.String(n.Status),
			keyNodeLatency.Float64(n.Latency.Seconds()),
		}
		if n.Err != nil {
			na = append(na, keyNodeError.String(n.Err.Error()))
		}
		span.AddEvent("redlock.node", trace.WithTimestamp(at), trace.WithAttributes(na...))
	}

	if !won {
		desc := string(e.Reason)
		if e.Err != nil {
			desc = e.Err.Error()
			if isException(e.Reason) {
				span.RecordError(e.Err, trace.WithTimestamp(end))
			}
		}
		span.SetStatus(codes.Error, desc)
	}
	span.End(trace.WithTimestamp(end))
}

// traceLock adds the end of a lock to the recording span of e.Ctx, if
// any.
func (o *Observer) traceLock(e redlock.Event) {
	if e.Ctx == nil {
		return
	}
	span := trace.SpanFromContext(e.Ctx)
	if !span.IsRecording() {
		return
	}
	name := "redlock.lock.released"
	if e.Lost {
		name = "redlock.lock.lost"
	}
	attrs := []attribute.KeyValue{
		keyKeys.StringSlice(e.Keys),
		keyHeld.Float64(e.Held.Seconds()),
		keyExtensions.Int(e.Extensions),
	}
	if e.Err != nil {
		attrs = append(attrs, keyError.String(e.Err.Error()))
	}
	span.AddEvent(name, trace.WithAttributes(attrs...))
}
