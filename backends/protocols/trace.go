package protocols

import (
	"context"
	"net/http"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Propagate writes the trace context of ctx into h, the headers of a
// replica request, with the global propagator (W3C traceparent and
// baggage by default; the llmedge app sets it as Caddy's tracing reads it,
// from OTEL_PROPAGATORS): a replica that traces (vLLM with
// --otlp-traces-endpoint) then continues the gateway's trace beneath the
// span of the call. Every backend that builds its own requests should call
// it. Without a trace in ctx it does nothing but look ctx up.
func Propagate(ctx context.Context, h http.Header) {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return
	}
	otel.GetTextMapPropagator().Inject(ctx, propagation.HeaderCarrier(h))
}
