# Strata: build, test and measure. `make help` lists the targets.

GO        ?= go
TOOLS     := $(CURDIR)/.tools
BIN       := $(CURDIR)/bin
# Packages whose tests run under the race detector: all of them, today.
RACE_PKGS ?= ./...
FUZZTIME  ?= 30s
BENCHTIME ?= 2s

export GOFLAGS ?= -buildvcs=false

.PHONY: help build test bench fuzz lint run clean

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-8s %s\n", $$1, $$2}'

build: ## compile every package
	$(GO) build ./...

test: ## vet, then every test with -race (fuzz targets run over their seed corpus)
	$(GO) mod download
	$(GO) vet ./...
	$(GO) test -race -count=1 -timeout 20m $(RACE_PKGS)

bench: ## engine benchmarks beside this machine's raw sequential write speed
	@echo "== raw disk: 1 GiB of 64 KiB writes, one fdatasync at the end (buffered)"
	@dd if=/dev/zero of=$(CURDIR)/.bench-dd bs=64k count=16384 conv=fdatasync 2>&1 | tail -n 1
	@echo "== raw disk: 256 MiB of 64 KiB writes, each synced (oflag=dsync)"
	@dd if=/dev/zero of=$(CURDIR)/.bench-dd bs=64k count=4096 oflag=dsync 2>&1 | tail -n 1
	@rm -f $(CURDIR)/.bench-dd
	$(GO) test -run '^$$' -bench . -benchmem -benchtime $(BENCHTIME) ./record/ ./hotlog/

fuzz: ## run each fuzz target for FUZZTIME (default 30s); new findings land in testdata
	@for pkg in ./record/ ./hotlog/; do \
	  for f in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz'); do \
	    echo "== $$pkg $$f"; \
	    $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$pkg || exit 1; \
	  done; \
	done

lint: ## gofmt and go vet
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

run: ## start one broker on loopback (arrives with the broker)
	@echo "make run: the broker is not built yet; see README.md" && exit 1

clean: ## remove build output and local data
	rm -rf $(BIN) ./data
