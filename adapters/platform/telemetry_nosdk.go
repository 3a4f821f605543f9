//go:build svz_nootel

package platform

import (
	"context"
	"fmt"
	"log/slog"

	"go.opentelemetry.io/otel/propagation"
)

// baggage is nil: a binary without the SDK exports nothing, and reads and passes on trace
// context only (OTEL_PROPAGATORS' baggage is left out).
func baggage() propagation.TextMapPropagator { return nil }

// exporters refuses: this binary was built without OpenTelemetry's SDK (the svz_nootel tag), so
// the export a setting asks for cannot happen; starting anyway would drop it silently.
func exporters(context.Context, platformKind, func(string) string, *slog.Logger, exportWanted, telemetrySetup) (telemetrySetup, error) {
	return telemetrySetup{}, fmt.Errorf("platform: an OTEL_* setting asks to export telemetry (OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_TRACES_EXPORTER...), but this binary was built with the svz_nootel tag, without the OpenTelemetry SDK: build it without the tag (svz deploy does when OTEL_* settings are passed; make build-ControllerFunction LAMBDA_OTEL=1), or unset the settings")
}
