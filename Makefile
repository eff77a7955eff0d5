# Strata: build, test and measure. `make help` lists the targets.

GO        ?= go
TOOLS     := $(CURDIR)/.tools
BIN       := $(CURDIR)/bin
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS   := -X main.version=$(VERSION)

# Pinned tool versions, installed into .tools/bin by `go install`.
PROTOC_GEN_GO_VERSION      := v1.36.12
PROTOC_GEN_GO_GRPC_VERSION := v1.6.2
GRPCURL_VERSION            := v1.9.4
# MinIO server for the object-store and end-to-end tests. Run as a separate
# process, never imported; the first build takes a few minutes.
MINIO_VERSION              := v0.0.0-20260212201848-7aac2a2c5b7c
# htmx for the console (console/static/htmx.min.js, committed): make
# ui-vendor fetches this version with npm and checks the file's sha256.
HTMX_VERSION               := 2.0.4
HTMX_SHA256                := e209dda5c8235479f3166defc7750e1dbcd5a5c1808b7792fc2e6733768fb447
# Packages whose tests run under the race detector: all of them, today.
RACE_PKGS ?= ./...
FUZZTIME  ?= 30s
BENCHTIME ?= 2s
# Seeds of the replication simulation (broker/sim_test.go) make test runs
# without the race detector, and make sim runs from SIM_FIRST.
SIM_SEEDS ?= 2000
SIM_FIRST ?= 1

export GOFLAGS ?= -buildvcs=false

.PHONY: help build test sim bench bench-cold bench-cold-isolation bench-latency bench-rf bench-failover bench-scale fuzz lint run run-minio certs cluster proto tools minio kcat chromium ui-vendor clean

help: ## list the targets
	@# The name column is as wide as the longest target name.
	@grep -hE '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' \
	  '{ n[NR] = $$1; d[NR] = $$2; if (length($$1) > w) w = length($$1) } \
	   END { for (i = 1; i <= NR; i++) printf("  %s  %s\n", sprintf("%-" w "s", n[i]), d[i]) }'

build: ## compile every package and build bin/strata
	$(GO) build ./...
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN)/strata ./cmd/strata

$(TOOLS)/bin/grpcurl:
	GOBIN=$(TOOLS)/bin $(GO) install github.com/fullstorydev/grpcurl/cmd/grpcurl@$(GRPCURL_VERSION)

$(TOOLS)/bin/protoc-gen-go:
	GOBIN=$(TOOLS)/bin $(GO) install google.golang.org/protobuf/cmd/protoc-gen-go@$(PROTOC_GEN_GO_VERSION)

$(TOOLS)/bin/protoc-gen-go-grpc:
	GOBIN=$(TOOLS)/bin $(GO) install google.golang.org/grpc/cmd/protoc-gen-go-grpc@$(PROTOC_GEN_GO_GRPC_VERSION)

$(TOOLS)/bin/minio:
	GOBIN=$(TOOLS)/bin $(GO) install github.com/minio/minio@$(MINIO_VERSION)

minio: $(TOOLS)/bin/minio ## install the pinned MinIO server the tests run into .tools/bin

tools: $(TOOLS)/bin/grpcurl minio kcat chromium ## install the tools the tests use into .tools/bin (kcat and chromium from Debian's packages)

kcat: ## kcat (librdkafka), the non-Go Kafka client the tests use: apt-get install -y kcat when missing
	@command -v kcat >/dev/null || apt-get install -y kcat || { apt-get update && apt-get install -y kcat; }

chromium: ## headless Chromium, the browser the console's e2e tests drive: apt-get install -y chromium when missing
	@command -v chromium >/dev/null || apt-get install -y chromium || { apt-get update && apt-get install -y chromium; }

ui-vendor: ## fetch htmx $(HTMX_VERSION) with npm into console/static and check its sha256 (the file is committed; nothing is fetched at run time)
	@tmp=$$(mktemp -d) && trap 'rm -rf $$tmp' EXIT && cd $$tmp && \
	  npm pack --silent htmx.org@$(HTMX_VERSION) >/dev/null && \
	  tar xzf htmx.org-$(HTMX_VERSION).tgz package/dist/htmx.min.js && \
	  echo "$(HTMX_SHA256)  package/dist/htmx.min.js" | sha256sum -c - && \
	  cp package/dist/htmx.min.js $(CURDIR)/console/static/htmx.min.js

test: tools build ## vet, every test with -race (fuzz targets over their seed corpus), then the replication simulation over SIM_SEEDS seeds
	$(GO) vet ./...
	STRATA_BIN=$(BIN)/strata STRATA_GRPCURL=$(TOOLS)/bin/grpcurl STRATA_MINIO=$(TOOLS)/bin/minio \
	  $(GO) test -race -count=1 -timeout 25m $(RACE_PKGS)
	@# The simulation runs on one goroutine: without the race detector it
	@# covers ten times the seeds in the same time.
	STRATA_SIM_SEEDS=$(SIM_SEEDS) $(GO) test -count=1 -timeout 15m -run '^TestSimulation$$' -v ./broker/

sim: ## the replication simulation over more seeds: make sim SIM_SEEDS=50000 SIM_FIRST=2001
	STRATA_SIM_SEEDS=$(SIM_SEEDS) STRATA_SIM_FIRST=$(SIM_FIRST) $(GO) test -count=1 -timeout 0 -run '^TestSimulation$$' -v ./broker/

bench: ## engine benchmarks beside this machine's raw sequential write speed
	@echo "== raw disk: 1 GiB of 64 KiB writes, one fdatasync at the end (buffered)"
	@dd if=/dev/zero of=$(CURDIR)/.bench-dd bs=64k count=16384 conv=fdatasync 2>&1 | tail -n 1
	@echo "== raw disk: 256 MiB of 64 KiB writes, each synced (oflag=dsync)"
	@dd if=/dev/zero of=$(CURDIR)/.bench-dd bs=64k count=4096 oflag=dsync 2>&1 | tail -n 1
	@rm -f $(CURDIR)/.bench-dd
	$(GO) test -run '^$$' -bench . -benchmem -benchtime $(BENCHTIME) ./record/
	@# 16384 appends of ~64 KiB: the same gigabyte dd wrote above.
	$(GO) test -run '^$$' -bench Append -benchmem -benchtime 16384x ./hotlog/
	$(GO) test -run '^$$' -bench Read -benchmem -benchtime $(BENCHTIME) ./hotlog/

# Every package with a fuzz target, found anew each run so none is left out.
FUZZ_PKGS = $(shell git ls-files '*_test.go' | xargs grep -l '^func Fuzz' | xargs -n1 dirname | sort -u | sed 's,^,./,')

fuzz: ## run every fuzz target of every package for FUZZTIME (default 30s); new findings land in testdata
	@for pkg in $(FUZZ_PKGS); do \
	  for f in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz'); do \
	    echo "== $$pkg $$f"; \
	    $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$pkg || exit 1; \
	  done; \
	done

lint: ## gofmt and go vet
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

run: build ## build and start one broker on loopback, data in ./data, Kafka clients on 127.0.0.1:9092
	$(BIN)/strata serve --data-dir ./data --kafka-listen 127.0.0.1:9092

proto: $(TOOLS)/bin/protoc-gen-go $(TOOLS)/bin/protoc-gen-go-grpc ## regenerate the gRPC code from rpc/proto (needs protoc: apt-get install protobuf-compiler)
	@command -v protoc >/dev/null || { echo "protoc not found: apt-get install protobuf-compiler"; exit 1; }
	PATH=$(TOOLS)/bin:$$PATH protoc -I rpc/proto \
	  --go_out=rpc/proto --go_opt=paths=source_relative \
	  --go-grpc_out=rpc/proto --go-grpc_opt=paths=source_relative \
	  rpc/proto/strata/v1/*.proto

clean: ## remove build output and local data (make run, run-minio, cluster and certs)
	rm -rf $(BIN) ./data ./data-minio ./.cluster ./certs

run-minio: build minio ## start a local MinIO and one broker using it as the cold tier (Ctrl-C stops both)
	@./scripts/run-minio.sh

certs: build ## a development CA, certificates for brokers 1-3 and client admin, and a gossip key, in ./certs
	$(BIN)/strata dev certs --dir ./certs

cluster: build minio ## start MinIO and three brokers forming one cluster on loopback with TLS, data and certificates in ./.cluster (Ctrl-C stops all)
	@./scripts/run-cluster.sh

bench-cold: build minio ## replay ~1 GB of history from MinIO: cold and warm cache, GETs per GB, broker CPU and heap allocated per cold GB, beside raw MinIO GETs and a hot-tier read
	STRATA_BIN=$(BIN)/strata STRATA_MINIO=$(TOOLS)/bin/minio \
	  $(GO) test -run '^$$' -bench 'ColdReplay$$' -benchtime 1x -timeout 30m -v ./e2e/

.PHONY: bench-cold-kafka
bench-cold-kafka: build minio ## replay 512 MiB of history from MinIO with strata bench consume over gRPC and through the Kafka listener (kgo): MB/s and broker and client CPU-s/GB, cold and warm cache
	STRATA_BIN=$(BIN)/strata STRATA_MINIO=$(TOOLS)/bin/minio \
	  $(GO) test -run '^$$' -bench ColdReplayKafka -benchtime 1x -timeout 30m -v ./e2e/

bench-cold-isolation: build minio ## produce p50/p99/p99.9 at 50 MB/s acks=all alone and during a full-speed cold replay of another topic from MinIO; the replay MB/s alone and under the writes; broker, MinIO and replay CPU
	STRATA_BIN=$(BIN)/strata STRATA_MINIO=$(TOOLS)/bin/minio \
	  $(GO) test -run '^$$' -bench ColdReplayIsolation -benchtime 1x -timeout 30m -v ./e2e/

.PHONY: bench-kafka
bench-kafka: build ## 1 KiB records, acks=all, produce and consume over gRPC and through the Kafka listener (kgo) in turn: records/s, CPU per record, the median Kafka/gRPC ratios
	@./scripts/bench-kafka.sh

.PHONY: bench-peers
bench-peers: build ## Strata beside NATS JetStream and Redis Streams (peerbench, PEERBENCH=path/run.sh), 3 rounds in turn: sync and async publish and consume of 1 KiB and 100 B records, msgs/s, p50/p99, server CPU-s/GB, median ratios
	@./scripts/bench-peers.sh

bench-latency: build ## end-to-end p50/p99/p99.9/max at 50 MiB/s of 1 KiB records, acks=all: flush.policy interval and always, RF=1 and RF=3
	@./scripts/bench-latency.sh

bench-rf: build ## acks=all produce to one partition: one broker (RF=1) against three on this machine (RF=3), the ratio, and CPU per GB of leader, followers and client
	@./scripts/bench-rf.sh

bench-scale: build ## one broker with 10,000 partition replicas and three with 30,000 (RF=3): RSS per idle replica, start to ready after a clean stop and kill -9, metadata and describe latency, produce over 1,000 partitions against one, Raft snapshot size
	@./scripts/bench-scale.sh

bench-failover: build ## three brokers: kill -9 of a leader to the next acknowledged write (5x); longest no-ack window on any partition while a broker is paused 8 s (3x)
	STRATA_BIN=$(BIN)/strata STRATA_MINIO=$(TOOLS)/bin/minio \
	  $(GO) test -run '^$$' -bench 'Failover|PausedBroker' -benchtime 1x -timeout 10m -v ./e2e/

.PHONY: bench-compact
bench-compact: build ## produce p99 at 5,000 records/s of 1 KiB to one topic alone and while the log cleaner cleans 384 MiB of another (compacted) topic; the cleaner's MB/s and CPU-s per GB cleaned
	STRATA_BIN=$(BIN)/strata \
	  $(GO) test -run '^$$' -bench 'CleanerIsolation$$' -benchtime 1x -timeout 20m -v ./e2e/

.PHONY: kafka-compat
kafka-compat: ## franz-go's own kgo integration tests against one strata serve (about 2-3 min; needs the Go module proxy once; not part of make test)
	@./scripts/kafka-compat.sh
