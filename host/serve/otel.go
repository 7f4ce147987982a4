package serve

import (
	"context"
	"log/slog"
	"os"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// traceQueue bounds the spans waiting for export: past it new spans are dropped, so a
// slow or absent collector never holds traffic up.
const traceQueue = 4096

// setupTracing turns OpenTelemetry tracing on when OTEL_EXPORTER_OTLP_ENDPOINT or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set (OTLP over HTTP, protobuf: otlpExporter), naming the
// service OTEL_SERVICE_NAME (default "stategate"). It returns nil (off) otherwise, and
// the function that flushes and stops the exporter.
//
// # Notes
//
//   - Spans go through a batch processor with a bounded queue that drops when full; the
//     exporter runs on its own goroutine with a 5s timeout per batch. A failing collector
//     is logged (at most once a minute) and costs requests nothing.
//   - The other standard variables (headers, timeout, compression, certificates) are read
//     by the exporter (otlpExporter). OTEL_TRACES_SAMPLER is not read: every request is
//     sampled unless the client's traceparent says not.
func setupTracing(ctx context.Context, logger *slog.Logger) (trace.Tracer, func(), error) {
	if os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") == "" && os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") == "" {
		return nil, func() {}, nil
	}
	exp, err := newOTLPExporter()
	if err != nil {
		return nil, nil, err
	}
	name := os.Getenv("OTEL_SERVICE_NAME")
	if name == "" {
		name = "stategate"
	}
	res, err := resource.New(ctx, resource.WithFromEnv(), resource.WithAttributes(attribute.String("service.name", name)))
	if err != nil {
		return nil, nil, err
	}
	var last time.Time
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		if time.Since(last) > time.Minute {
			last = time.Now()
			logger.Warn("trace export failed (spans are dropped, traffic is not affected)", "err", err)
		}
	}))
	tp := sdktrace.NewTracerProvider(sdktrace.WithResource(res), sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.AlwaysSample())),
		sdktrace.WithBatcher(exp, sdktrace.WithMaxQueueSize(traceQueue), sdktrace.WithBatchTimeout(time.Second),
			sdktrace.WithExportTimeout(5*time.Second)))
	logger.Info("tracing on", "service", name)
	return tp.Tracer("github.com/stategate/stategate"), func() {
		sctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		_ = tp.Shutdown(sctx)
	}, nil
}
