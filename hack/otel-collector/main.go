// Command agentrun-otelcol is the OpenTelemetry Collector the tests export
// to: a build with only the OTLP receiver (gRPC and HTTP/protobuf) and the
// file exporter, so a test can read back, as JSON lines, exactly what
// agentrun sent. hack/otel-collector.sh builds it into .cache/.
package main

import (
	"fmt"
	"os"

	"github.com/open-telemetry/opentelemetry-collector-contrib/exporter/fileexporter"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/provider/fileprovider"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/otelcol"
	"go.opentelemetry.io/collector/receiver"
	"go.opentelemetry.io/collector/receiver/otlpreceiver"
	"go.opentelemetry.io/collector/service/telemetry/otelconftelemetry"
)

func components() (otelcol.Factories, error) {
	var f otelcol.Factories
	var err error
	if f.Receivers, err = otelcol.MakeFactoryMap[receiver.Factory](otlpreceiver.NewFactory()); err != nil {
		return f, err
	}
	if f.Exporters, err = otelcol.MakeFactoryMap[exporter.Factory](fileexporter.NewFactory()); err != nil {
		return f, err
	}
	f.Telemetry = otelconftelemetry.NewFactory()
	return f, nil
}

func main() {
	set := otelcol.CollectorSettings{
		BuildInfo: component.BuildInfo{Command: "agentrun-otelcol",
			Description: "OpenTelemetry Collector (OTLP receiver, file exporter) for agentrun's tests", Version: "0.161.0"},
		Factories: components,
		ConfigProviderSettings: otelcol.ConfigProviderSettings{ResolverSettings: confmap.ResolverSettings{
			ProviderFactories: []confmap.ProviderFactory{fileprovider.NewFactory()}, DefaultScheme: "file"}},
	}
	if err := otelcol.NewCommand(set).Execute(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
