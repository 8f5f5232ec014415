// Package redlockotel reports what a redlock.Client does as OpenTelemetry
// spans and metrics. Pass its Observe to redlock.WithObserver.
//
//	obs, err := redlockotel.New() // the global TracerProvider and MeterProvider
//	if err != nil { ... }
//	locker, err := redlock.New(clients, redlock.WithObserver(obs.Observe))
//
// It is its own module, so that importing redlock never downloads
// OpenTelemetry.
//
// # Spans
//
// One span per round, named after its op: "redlock.lock" (an acquire
// attempt: Lock makes one per try), "redlock.extend", "redlock.unlock"
// (a release by Unlock, or of a win the library undoes) and
// "redlock.fence" (the second round of a fenced acquire). The clean-up
// releases of a lost attempt are not rounds: they are in the metrics
// (op "unlock"), not in spans. Its parent is the span in the context of the call that ran
// the round (TryLock's, Extend's, ...); without one it is a root span.
// The span is made when the round is decided, with the round's start and
// decision times (trace.WithTimestamp), so it covers exactly the round,
// not the retry wait around it. Kind: internal.
//
// Span attributes:
//
//	redlock.op           "lock", "extend", "unlock" or "fence"
//	redlock.keys         the lock's keys (string slice)
//	redlock.reason       won, contended, unreachable, cancelled, expired, not_held
//	redlock.won          whether the round won its quorum
//	redlock.nodes.ok, .taken, .absent, .failed, .pending
//	                     how many nodes were in each state at the decision
//	error.type           the reason, when the round did not win
//
// and one span event "redlock.node" per node, stamped at the node's reply
// (or at the decision for a node still pending), with redlock.node.index,
// redlock.node.address, redlock.node.status (ok, taken, absent, failed,
// pending), redlock.node.latency (seconds, float) and, for a failure,
// redlock.node.error. Replies that arrive after the decision are not in
// the span (it has ended); they are in the metrics.
//
// A round that did not win has status Error with the round's error as the
// description. Only failures of the infrastructure or of the lock
// (unreachable, expired, not_held) also get an "exception" event
// (span.RecordError): contention and cancellation are ordinary outcomes
// of a lock, a busy key polled by Lock is not an exception, and error
// rates computed from exception events stay meaningful. Filter on
// redlock.reason to tell them apart.
//
// When a lock ends (a "lock" Event), an event
// "redlock.lock.released" or "redlock.lock.lost" (redlock.keys,
// redlock.lock.held in seconds, redlock.lock.extensions) is added to the
// recording span in the context of the call that ended it: Unlock's, or
// for a lost lock the call that acquired it, which is usually still
// working under it.
//
// go-redis spans (redisotel's hooks on the node clients) are not children
// of a round span, which is made after the fact: they are its siblings,
// children of the caller's span. Under load several callers' requests to
// one node share a pipeline, whose go-redis span lands in the trace of
// the first of them; see docs/observability.md.
//
// # Metrics
//
// Instrument names follow the OpenTelemetry conventions (durations in
// seconds, dotted names, units in UCUM); a Prometheus exporter turns them
// into the names of the redlockprom module (redlock.round.duration into
// redlock_round_duration_seconds, and so on), with the attributes as
// labels redlock_op, redlock_reason, redlock_node_index.
//
//	redlock.round.duration          histogram, s         redlock.op, redlock.reason
//	redlock.acquire.attempts        counter, {attempt}   redlock.reason            (op "lock")
//	redlock.extensions              counter, {extension}                           (op "extend", won)
//	redlock.locks.held              up-down counter, {lock}
//	redlock.locks.released          counter, {lock}
//	redlock.locks.lost              counter, {lock}
//	redlock.lock.hold.duration      histogram, s                                   ("lock" Event: Held)
//	redlock.node.request.duration   histogram, s         redlock.op, redlock.node.index
//	redlock.node.errors             counter, {error}     redlock.op, redlock.node.index
//
// Histograms advise the bucket boundaries 0.5ms, 1ms, 2.5ms, 5ms, 10ms,
// 25ms, 50ms, 100ms, 250ms, 500ms, 1s, 2.5s, 5s and 10s (a round takes
// about a network round trip); a View overrides them.
//
// redlock.locks.held is +1 for every won "lock" round and -1 when the
// lock ends (released or lost, a "lock" Event), or when a "fence" round
// fails (the library then undoes the win and no lock ends). It drifts up
// for a lock that is dropped without Unlock and never watched (Done, Err,
// AutoExtend), and for the rare win the library undoes without a failed
// fence round: a win that had no validity left, or a client that found
// two nodes to be one server. Keys are never metric attributes: they are
// unbounded.
//
// The node index is the node's place in the list given to redlock.New:
// stable and bounded. Addresses are in the span events only.
package redlockotel

import (
	"errors"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/seed543a70bd/redlock"
)

// ScopeName is the instrumentation scope of the tracer and the meter.
const ScopeName = "github.com/seed543a70bd/redlock/extra/redlockotel"

// Observer turns redlock events into spans and metrics. Make one with New;
// it is safe for concurrent use, and one Observer may serve many Clients.
// The zero Observer and a nil *Observer do nothing.
type Observer struct {
	tracer trace.Tracer
	m      instruments
	cache  attrCache
}

// Option configures New.
type Option func(*config)

type config struct {
	tp trace.TracerProvider
	mp metric.MeterProvider
}

// WithTracerProvider makes the Observer create its spans with tp.
// Default: the global provider, otel.GetTracerProvider(), read when New
// is called. A nil tp keeps the default.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(c *config) {
		if tp != nil {
			c.tp = tp
		}
	}
}

// WithMeterProvider makes the Observer create its instruments with mp.
// Default: the global provider, otel.GetMeterProvider(), read when New is
// called. A nil mp keeps the default.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(c *config) {
		if mp != nil {
			c.mp = mp
		}
	}
}

// New returns an Observer that traces with the tracer and records with
// the meter named ScopeName from the providers (default: the global
// ones). It returns an error when an instrument could not be created;
// the Observer is usable all the same (that instrument records nothing),
// as the OpenTelemetry API intends.
func New(opts ...Option) (*Observer, error) {
	c := config{tp: otel.GetTracerProvider(), mp: otel.GetMeterProvider()}
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	o := &Observer{tracer: c.tp.Tracer(ScopeName)}
	err := o.m.init(c.mp.Meter(ScopeName))
	if err != nil {
		err = errors.Join(errors.New("redlockotel: creating instruments"), err)
	}
	return o, err
}

// Observe records one of the library's events: give it to
// redlock.WithObserver (as o.Observe). It is safe for concurrent use;
// on a nil or zero Observer it does nothing.
func (o *Observer) Observe(e redlock.Event) {
	switch e.Kind {
	case "node":
		o.observeNode(e)
	case "round":
		o.observeRound(e)
	case "lock":
		o.observeLock(e)
	}
}

// observeNode records a node request's latency and, when it failed, a
// node error. Node requests get no span of their own: they are events of
// their round's span.
func (o *Observer) observeNode(e redlock.Event) {
	if o == nil || o.tracer == nil {
		return
	}
	o.recordNode(e)
}

// observeRound records the round's span (see the package doc) and its
// metrics.
func (o *Observer) observeRound(e redlock.Event) {
	if o == nil || o.tracer == nil {
		return
	}
	o.traceRound(e)
	o.recordRound(e)
}

// observeLock records the end of a lock: the locks.held decrement, the
// released or lost counter and the hold time, and an event on the
// caller's span.
func (o *Observer) observeLock(e redlock.Event) {
	if o == nil || o.tracer == nil {
		return
	}
	o.traceLock(e)
	o.recordLock(e)
}
