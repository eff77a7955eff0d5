package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// grpcurlBin is the grpcurl that `make tools` installs into .tools/bin.
func grpcurlBin(t *testing.T) string {
	if bin := os.Getenv("STRATA_GRPCURL"); bin != "" {
		return bin
	}
	bin := "../.tools/bin/grpcurl"
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("grpcurl not found at %s: run `make tools` (make test does)", bin)
	}
	return bin
}

// grpcurl calls a method with a JSON request, or lists the services when
// method is "list".
func grpcurl(t *testing.T, addr, method, request string) string {
	t.Helper()
	args := []string{"-plaintext"}
	if request != "" {
		args = append(args, "-d", request)
	}
	out, err := exec.Command(grpcurlBin(t), append(args, addr, method)...).CombinedOutput()
	if err != nil {
		t.Fatalf("grpcurl %s %s: %v\n%s", method, request, err, out)
	}
	return string(out)
}

// TestGrpcurl uses nothing but grpcurl and server reflection: list the
// services, create a topic, produce one record and fetch it back.
func TestGrpcurl(t *testing.T) {
	b := newBroker(t, 1)
	b.start()
	services := grpcurl(t, b.addr, "list", "")
	for _, want := range []string{"strata.v1.ProduceService", "strata.v1.FetchService", "strata.v1.AdminService", "grpc.health.v1.Health"} {
		if !strings.Contains(services, want) {
			t.Fatalf("grpcurl list lacks %s:\n%s", want, services)
		}
	}
	grpcurl(t, b.addr, "strata.v1.AdminService/CreateTopic", `{"name": "hello", "partitions": 1}`)
	// "c3RyYXRh" is base64 for "strata".
	grpcurl(t, b.addr, "strata.v1.ProduceService/Produce", `{"topic": "hello", "records": [{"key": "a2V5", "value": "c3RyYXRh"}]}`)
	out := grpcurl(t, b.addr, "strata.v1.FetchService/Fetch", `{"topic": "hello", "decode": true, "stop_at_end": true}`)
	var resp struct {
		Records []struct {
			Key, Value string
		}
		HighWatermark string
	}
	if err := json.Unmarshal([]byte(out), &resp); err != nil {
		t.Fatalf("fetch output %q: %v", out, err)
	}
	if len(resp.Records) != 1 || resp.Records[0].Value != "c3RyYXRh" || resp.Records[0].Key != "a2V5" || resp.HighWatermark != "1" {
		t.Fatalf("fetched %s", out)
	}
}
