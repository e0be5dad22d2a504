# llmedge — see README.md.
GO        ?= go
BIN       := bin
GOFLAGS_T ?= -race -count=1 -timeout 40m

.PHONY: all build run test unit fuzz vet fmt xcaddy consul clean bench

all: build

build: ## bin/llmedge (Caddy + llmedge modules) and bin/llmsim (replica simulator)
	$(GO) build -o $(BIN)/llmedge ./cmd/llmedge
	$(GO) build -o $(BIN)/llmsim ./cmd/llmsim

run: build ## demo: simulated replicas + gateway on https://localhost:8443, user demo/demo
	./scripts/run.sh

test: vet consul ## everything, with the race detector: unit, Caddyfile golden, end-to-end, fuzz smoke
	$(GO) test $(GOFLAGS_T) ./...
	./scripts/fuzz.sh 50000x

unit: ## fast tests only (no processes, no HTTPS)
	$(GO) test $(GOFLAGS_T) -short ./...

fuzz: ## every fuzz target for FUZZTIME each (default 1m)
	./scripts/fuzz.sh $${FUZZTIME:-1m}

vet:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "gofmt needed"; exit 1; }
	$(GO) vet ./...

fmt:
	gofmt -w $$(git ls-files '*.go')

consul: $(BIN)/consul ## the Consul agent the tests run (v1.20.6, pinned in tools/consul), built once

# About 5 minutes on 2 cores, 180 MB: built only when missing (or when the
# pin changes), into the git-ignored bin/. The committed go.sum verifies it.
$(BIN)/consul: tools/consul/go.mod tools/consul/go.sum
	cd tools/consul && $(GO) build -o ../../$(BIN)/consul github.com/hashicorp/consul

bench: build ## replica alone vs stock Caddy vs llmedge, < 3 min; e.g. BENCHFLAGS="-write BENCHMARKS.md -long 30s"
	$(GO) build -o $(BIN)/llmbench ./cmd/llmbench
	$(BIN)/llmbench -bin $(BIN) -json $(BIN)/bench.json $(BENCHFLAGS)

xcaddy: ## the same binary built by xcaddy from xcaddy.json, as bin/llmedge-xcaddy
	./scripts/xcaddy-build.sh $(BIN)/llmedge-xcaddy

clean:
	rm -rf $(BIN) .data
