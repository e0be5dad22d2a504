package gateway

import (
	"context"
	"errors"
	"net/http"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/llmedge/llmedge/api"
	"github.com/llmedge/llmedge/backends/pool"
	"github.com/llmedge/llmedge/backends/protocols"
)

// Tracing. Caddy's `tracing` handler starts a server span for each request
// and puts it in the request's context; the gateway then adds a span per
// stage beneath it:
//
//	llmedge.auth, llmedge.validate      authentication, body validation
//	llmedge.admit                       the tenant's limits (only when some are configured)
//	llmedge.route                       the routing stage, every attempt
//	  llmedge.select                    queue wait and the policy's pick, per attempt
//	  llmedge.replica                   the call to the replica, per attempt (client span;
//	    llmedge.first_token             its traceparent goes to the replica)
//
// Attributes name the model, replica, attempt and the policy's decision,
// never message content or credentials. Without a recording server span
// (tracing not configured, or this trace not sampled) the exchange has no
// tracer and no span is made: each helper below returns at once.

// TracerName is the instrumentation scope of llmedge's spans.
const TracerName = "github.com/llmedge/llmedge/gateway"

// Span names.
const (
	SpanAuth       = "llmedge.auth"
	SpanValidate   = "llmedge.validate"
	SpanAdmit      = "llmedge.admit"
	SpanRoute      = "llmedge.route"
	SpanSelect     = "llmedge.select"
	SpanReplica    = "llmedge.replica"
	SpanFirstToken = "llmedge.first_token"
)

// Attribute keys.
const (
	AttrModel     = attribute.Key("llmedge.model")
	AttrRequestID = attribute.Key("llmedge.request_id")
	AttrFront     = attribute.Key("llmedge.api")
	AttrStream    = attribute.Key("llmedge.stream")
	AttrAttempt   = attribute.Key("llmedge.attempt")
	AttrAttempts  = attribute.Key("llmedge.attempts")
	AttrReplica   = attribute.Key("llmedge.replica")
	// AttrReason and AttrCached are the policy's decision: why the
	// replica was chosen, and the predicted cached share of the prompt
	// (absent when the policy does not predict).
	AttrReason    = attribute.Key("llmedge.lb.reason")
	AttrCached    = attribute.Key("llmedge.lb.predicted_cached")
	AttrErrorKind = attribute.Key("llmedge.error.kind")
	AttrStatus    = attribute.Key("http.response.status_code")
	AttrInput     = attribute.Key("gen_ai.usage.input_tokens")
	AttrOutput    = attribute.Key("gen_ai.usage.output_tokens")
)

// tracerOf is the tracer of a request's spans: that of the server span in
// ctx when it records, else nil. The span's own provider is used, not the
// global one: Caddy's tracing keeps its provider to itself.
func tracerOf(ctx context.Context) trace.Tracer {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return nil
	}
	return span.TracerProvider().Tracer(TracerName)
}

// traceStage records a pipeline stage that ran from start until now; a
// refusal carries the status it answered (a refusal is the stage doing its
// job, not a failure of the gateway).
func (ex *Exchange) traceStage(ctx context.Context, name string, start time.Time, refused *api.Error) {
	if ex.tracer == nil {
		return
	}
	_, span := ex.tracer.Start(ctx, name, trace.WithTimestamp(start),
		trace.WithAttributes(AttrRequestID.String(ex.RequestID), AttrFront.String(ex.Door.Name())))
	if refused != nil {
		span.SetAttributes(AttrStatus.Int(refused.Status))
	}
	span.End()
}

// traceRoute starts the routing stage's span; endRoute ends it with the
// request's outcome.
func (ex *Exchange) traceRoute(ctx context.Context) (context.Context, trace.Span) {
	if ex.tracer == nil {
		return ctx, nil
	}
	return ex.tracer.Start(ctx, SpanRoute, trace.WithAttributes(AttrModel.String(ex.Chat.Model),
		AttrStream.Bool(ex.Chat.Stream), AttrRequestID.String(ex.RequestID), AttrFront.String(ex.Door.Name())))
}

func (ex *Exchange) endRoute(span trace.Span) {
	if span == nil {
		return
	}
	span.SetAttributes(AttrStatus.Int(ex.Status), AttrAttempts.Int(ex.Attempts))
	if ex.Usage.PromptTokens > 0 || ex.Usage.CompletionTokens > 0 {
		span.SetAttributes(AttrInput.Int(ex.Usage.PromptTokens), AttrOutput.Int(ex.Usage.CompletionTokens))
	}
	if ex.Status >= 500 || ex.StreamError {
		span.SetStatus(codes.Error, http.StatusText(ex.Status))
	}
	span.End()
}

// traceSelect records the wait for a replica and the policy's pick for
// attempt, from start until now; err is Acquire's failure.
func (ex *Exchange) traceSelect(ctx context.Context, attempt int, start time.Time, c pool.Choice, err error) {
	if ex.tracer == nil {
		return
	}
	_, span := ex.tracer.Start(ctx, SpanSelect, trace.WithTimestamp(start), trace.WithAttributes(AttrAttempt.Int(attempt)))
	if err != nil {
		span.SetStatus(codes.Error, err.Error()) // pool's own words: no replica, saturated, ...
	} else {
		span.SetAttributes(choiceAttrs(c)...)
	}
	span.End()
}

func choiceAttrs(c pool.Choice) []attribute.KeyValue {
	kv := []attribute.KeyValue{AttrReplica.String(c.Replica.PublicURL()), AttrReason.String(c.Reason)}
	if c.Cached >= 0 {
		kv = append(kv, AttrCached.Float64(c.Cached))
	}
	return kv
}

// traceAttempt starts the span of the call to the replica; its context
// goes with the call, so the replica's traceparent names this span.
func (ex *Exchange) traceAttempt(ctx context.Context, attempt int, c pool.Choice) (context.Context, trace.Span) {
	if ex.tracer == nil {
		return ctx, nil
	}
	kv := append(choiceAttrs(c), AttrModel.String(ex.Chat.Model), AttrAttempt.Int(attempt))
	return ex.tracer.Start(ctx, SpanReplica, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(kv...))
}

// endAttempt ends the replica call's span with its outcome: the error's
// kind, never its message (a replica's message may quote the prompt).
func endAttempt(span trace.Span, err error) {
	if span == nil {
		return
	}
	if err != nil {
		kind := "unknown"
		var be *protocols.Error
		switch {
		case errors.Is(err, errClientGone), errors.Is(err, context.Canceled):
			kind = "canceled" // the client left: the replica is not at fault
		case errors.As(err, &be):
			kind = be.Kind.String()
			if be.Status > 0 {
				span.SetAttributes(AttrStatus.Int(be.Status))
			}
		}
		span.SetAttributes(AttrErrorKind.String(kind))
		span.SetStatus(codes.Error, kind)
	}
	span.End()
}

// traceFirstToken records the wait for the replica's first token, from
// sent to at, beneath the replica call's span in ctx.
func (ex *Exchange) traceFirstToken(ctx context.Context, sent, at time.Time) {
	if ex.tracer == nil {
		return
	}
	_, span := ex.tracer.Start(ctx, SpanFirstToken, trace.WithTimestamp(sent))
	span.End(trace.WithTimestamp(at))
}
