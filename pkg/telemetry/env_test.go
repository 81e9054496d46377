package telemetry

import "testing"

func TestFromEnv(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		env     map[string]string
		on      bool
		proto   string
		wantErr bool
	}{
		{name: "nothing set: off"},
		{name: "endpoint: on over http", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, on: true, proto: protoHTTP},
		{name: "traces endpoint: on", env: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4318/v1/traces"}, on: true, proto: protoHTTP},
		{name: "exporter otlp alone: on (default endpoint)", env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, on: true, proto: protoHTTP},
		{name: "exporter OTLP in capitals", env: map[string]string{"OTEL_TRACES_EXPORTER": "OTLP"}, on: true, proto: protoHTTP},
		{name: "exporter none beats an endpoint", env: map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}},
		{name: "sdk disabled beats everything", env: map[string]string{"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}},
		{name: "sdk disabled TRUE", env: map[string]string{"OTEL_SDK_DISABLED": "TRUE", "OTEL_TRACES_EXPORTER": "otlp"}},
		{name: "sdk disabled false: on", env: map[string]string{"OTEL_SDK_DISABLED": "false", "OTEL_TRACES_EXPORTER": "otlp"}, on: true, proto: protoHTTP},
		{name: "sdk disabled garbage", env: map[string]string{"OTEL_SDK_DISABLED": "yes"}, wantErr: true},
		{name: "exporter console refused", env: map[string]string{"OTEL_TRACES_EXPORTER": "console"}, wantErr: true},
		{name: "exporter list refused", env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp,console"}, wantErr: true},
		{name: "grpc", env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, on: true, proto: protoGRPC},
		{name: "traces protocol beats general", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "grpc"}, on: true, proto: protoGRPC},
		{name: "http/protobuf explicit", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"}, on: true, proto: protoHTTP},
		{name: "http/json refused", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, wantErr: true},
		{name: "bad protocol ignored when off", env: map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "carrier-pigeon"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s, err := fromEnv(func(k string) string { return tt.env[k] })
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, want error %v", err, tt.wantErr)
			}
			if s.enabled != tt.on || s.protocol != tt.proto {
				t.Errorf("got enabled=%v protocol=%q, want %v %q", s.enabled, s.protocol, tt.on, tt.proto)
			}
		})
	}
}

func TestRedact(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"":                      "default",
		"http://collector:4318": "http://collector:4318",
		"https://user:pw@otel.example/v1/x?token=abc#f": "https://otel.example/v1/x",
		"::not a url": "(unparsed)",
	} {
		if got := redact(in); got != want {
			t.Errorf("redact(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestMetricsFromEnv: the metrics export follows the same rules as traces,
// with its own exporter, endpoint and protocol variables.
func TestMetricsFromEnv(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		env     map[string]string
		on      bool
		proto   string
		wantErr bool
	}{
		{name: "nothing set: off"},
		{name: "endpoint: on", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, on: true, proto: protoHTTP},
		{name: "metrics endpoint: on", env: map[string]string{"OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": "http://c:4318/v1/metrics"}, on: true, proto: protoHTTP},
		{name: "traces endpoint alone: off", env: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4318/v1/traces"}},
		{name: "metrics none beats an endpoint", env: map[string]string{"OTEL_METRICS_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}},
		{name: "traces none leaves metrics on", env: map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, on: true, proto: protoHTTP},
		{name: "prometheus: no OTLP export", env: map[string]string{"OTEL_METRICS_EXPORTER": "prometheus", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}},
		{name: "console refused", env: map[string]string{"OTEL_METRICS_EXPORTER": "console"}, wantErr: true},
		{name: "sdk disabled", env: map[string]string{"OTEL_SDK_DISABLED": "true", "OTEL_METRICS_EXPORTER": "otlp"}},
		{name: "metrics protocol beats general", env: map[string]string{"OTEL_METRICS_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf", "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL": "grpc"}, on: true, proto: protoGRPC},
		{name: "traces protocol does not apply", env: map[string]string{"OTEL_METRICS_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "grpc"}, on: true, proto: protoHTTP},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s, err := signalFromEnv(func(k string) string { return tt.env[k] }, "METRICS")
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, want error %v", err, tt.wantErr)
			}
			if s.enabled != tt.on || s.protocol != tt.proto {
				t.Errorf("got enabled=%v protocol=%q, want %v %q", s.enabled, s.protocol, tt.on, tt.proto)
			}
		})
	}
	// Traces refuse the prometheus exporter name.
	if _, err := fromEnv(func(k string) string { return map[string]string{"OTEL_TRACES_EXPORTER": "prometheus"}[k] }); err == nil {
		t.Error("OTEL_TRACES_EXPORTER=prometheus accepted")
	}
}
