# llmedge — see README.md.
GO        ?= go
BIN       := bin
GOFLAGS_T ?= -race -count=1 -timeout 40m
# llmedge's version and commit for `llmedge version`, from git (the build
# info's own VCS stamp is missing where -buildvcs is off or .git is a
# worktree's file); empty outside a checkout.
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null)
COMMIT    ?= $(shell git rev-parse HEAD 2>/dev/null)
LDFLAGS   := -X main.version=$(VERSION) -X main.commit=$(COMMIT)

.PHONY: all build run run-real test unit fuzz vet fmt xcaddy consul coredns kube ollama oidcprovider sdk agents clean bench

all: build

build: ## bin/llmedge (Caddy + llmedge modules) and bin/llmsim (replica simulator)
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/llmedge ./cmd/llmedge
	$(GO) build -o $(BIN)/llmsim ./cmd/llmsim

run: build ## demo: simulated replicas + gateway on https://localhost:8443, user demo/demo
	./scripts/run.sh

run-real: build ollama ## the same demo with real engines: Ollama with tiny random-weight models on the replicas' ports
	$(GO) build -o $(BIN)/tinymodel ./cmd/tinymodel
	./scripts/run-real.sh

test: vet consul coredns kube ollama oidcprovider sdk agents ## everything, with the race detector: unit, Caddyfile golden, end-to-end, fuzz smoke
	$(GO) test $(GOFLAGS_T) ./...
	./scripts/fuzz.sh 50000x

unit: ## fast tests only (no processes, no HTTPS)
	$(GO) test $(GOFLAGS_T) -short ./...

fuzz: ## every fuzz target for FUZZTIME each (default 1m)
	./scripts/fuzz.sh $${FUZZTIME:-1m}

vet:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "gofmt needed"; exit 1; }
	$(GO) vet ./...
	cd e2e/sdk/go && $(GO) vet ./...

fmt:
	gofmt -w $$(git ls-files '*.go')

consul: $(BIN)/consul ## the Consul agent the tests run (v1.20.6, pinned in tools/consul), built once

sdk: e2e/sdk/node/node_modules/.package-lock.json ## the npm openai package the SDK tests run (pinned in its package-lock.json)

# npm writes node_modules/.package-lock.json at each install: reinstall
# only when the lock file is newer.
e2e/sdk/node/node_modules/.package-lock.json: e2e/sdk/node/package-lock.json
	npm ci --prefix e2e/sdk/node --no-audit --no-fund

agents: e2e/agents/node_modules/.package-lock.json ## the coding agents the agents' tests run (Claude Code, Codex, opencode, Qwen Code, and a Node 22 for them; pinned in e2e/agents/package-lock.json)

# About 40 s and 550 MB of downloads on a cold npm cache, 1.5 GB installed
# (the agents ship native binaries of 180 to 400 MB each).
e2e/agents/node_modules/.package-lock.json: e2e/agents/package-lock.json
	npm ci --prefix e2e/agents --no-audit --no-fund

# About 5 minutes on 2 cores, 180 MB: built only when missing (or when the
# pin changes), into the git-ignored bin/. The committed go.sum verifies it.
$(BIN)/consul: tools/consul/go.mod tools/consul/go.sum
	cd tools/consul && $(GO) build -o ../../$(BIN)/consul github.com/hashicorp/consul

coredns: $(BIN)/coredns ## the DNS server the DNS source's tests run (a slim CoreDNS v1.15.0, pinned in tools/coredns), built once

# About a minute on a cold module cache, 24 MB: only the plugins a test
# zone needs (tools/coredns/main.go), built only when missing or when the
# pin changes, into the git-ignored bin/.
$(BIN)/coredns: tools/coredns/go.mod tools/coredns/go.sum tools/coredns/main.go
	cd tools/coredns && $(GO) build -o ../../$(BIN)/coredns .

kube: $(BIN)/kube-apiserver $(BIN)/etcd $(BIN)/kubectl ## the Kubernetes API server, etcd and kubectl the Kubernetes source's tests run (pinned in tools/kube), built once

# The pinned release, read from the tools module so it is written down once,
# stamped into the binaries so that /version and `kubectl version` tell it.
KUBE_VERSION = $(shell awk '$$1 == "require" && $$2 == "k8s.io/kubernetes" { print $$3 } $$1 == "k8s.io/kubernetes" { print $$2 }' tools/kube/go.mod)
KUBE_LDFLAGS = -s -w -X k8s.io/component-base/version.gitVersion=$(KUBE_VERSION) \
	-X k8s.io/component-base/version.gitMajor=$(word 2,$(subst ., ,$(subst v,v ,$(KUBE_VERSION)))) \
	-X k8s.io/component-base/version.gitMinor=$(word 3,$(subst ., ,$(subst v,v ,$(KUBE_VERSION)))) \
	-X k8s.io/component-base/version.gitTreeState=clean

# About 600 CPU-seconds and 2.7 GB of build cache on a cold cache, 170 MB:
# built only when missing or when the pin changes, into the git-ignored bin/.
# k8s.io/kubernetes cannot be `go install`ed (its go.mod replaces its staging
# modules with local paths), hence the module of our own with replace lines.
$(BIN)/kube-apiserver: tools/kube/go.mod tools/kube/go.sum
	cd tools/kube && $(GO) build -trimpath -ldflags "$(KUBE_LDFLAGS)" -o ../../$(BIN)/kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver

$(BIN)/kubectl: tools/kube/go.mod tools/kube/go.sum
	cd tools/kube && $(GO) build -trimpath -ldflags "$(KUBE_LDFLAGS)" -o ../../$(BIN)/kubectl k8s.io/kubernetes/cmd/kubectl

# etcd has a module of its own (tools/kube/etcd): Kubernetes' go.mod asks
# for etcd's server packages at a newer version than the release we run.
$(BIN)/etcd: tools/kube/etcd/go.mod tools/kube/etcd/go.sum
	cd tools/kube/etcd && $(GO) build -trimpath -ldflags "-s -w" -o ../../../$(BIN)/etcd go.etcd.io/etcd/server/v3

oidcprovider: $(BIN)/oidcprovider ## the OpenID provider the identity tests trust (zitadel/oidc's op package, pinned in tools/oidcprovider), built once

# Seconds with a warm module cache: built only when missing or when the
# tool or its pin changes, into the git-ignored bin/.
$(BIN)/oidcprovider: tools/oidcprovider/go.mod tools/oidcprovider/go.sum tools/oidcprovider/main.go
	cd tools/oidcprovider && $(GO) build -o ../../$(BIN)/oidcprovider .

ollama: $(BIN)/ollama ## a real inference engine for the tests (Ollama, pinned in tools/ollama), built once

# The pinned version, read from the tools module so it is written down once.
OLLAMA_VERSION = $(shell awk '$$1 == "github.com/ollama/ollama" { sub(/^v/, "", $$2); print $$2 }' tools/ollama/go.mod)

# About 9 CPU-minutes (mostly llama.cpp's C++), 35 MB, CPU only: built
# only when missing or when the pin changes. The module zip lacks
# llama.cpp's vendored headers: nlohmann/json and stb come from Debian
# (nlohmann-json3-dev, libstb-dev; .ci/run installs them), miniaudio from
# the stub in tools/ollama/include (audio input only, which we never use).
# -O2 without the default -g: the binary is stripped anyway, and debug
# information makes the C++ compile of llama.cpp markedly slower.
$(BIN)/ollama: tools/ollama/go.mod tools/ollama/go.sum tools/ollama/include/miniaudio/miniaudio.h
	@for h in nlohmann/json_fwd.hpp stb/stb_image.h; do \
		echo "#include <$$h>" | $${CXX:-c++} -E -x c++ - >/dev/null 2>&1 || \
		{ echo "$$h not found: apt-get install nlohmann-json3-dev libstb-dev"; exit 1; }; \
	done
	cd tools/ollama && CGO_ENABLED=1 CGO_CPPFLAGS="-I$(CURDIR)/tools/ollama/include" CGO_CFLAGS="-O2" CGO_CXXFLAGS="-O2" \
		$(GO) build -trimpath -ldflags "-s -w -X github.com/ollama/ollama/version.Version=$(OLLAMA_VERSION)" \
		-o ../../$(BIN)/ollama github.com/ollama/ollama

bench: build ## replica alone vs stock Caddy vs llmedge, every door at 1 KB to 1 MB, routing through one and four instances (Redis), overload, the ledger, tenants, batches; about 20 min; e.g. BENCHFLAGS="-write BENCHMARKS.md"; one scenario: BENCHFLAGS="-scenarios doors"; scale-out over 1, 2, 4 instances, every variant: BENCHFLAGS="-scenarios scaleout -scaleout-instances 1,2,4 -scaleout-variants round_robin,prefix_cache,prefix_cache+share"
	$(GO) build -o $(BIN)/llmbench ./cmd/llmbench
	$(GO) test -c -o $(BIN)/bench.test ./bench/
	$(BIN)/llmbench -bin $(BIN) -json $(BIN)/bench.json $(BENCHFLAGS)

xcaddy: ## the same binary built by xcaddy from xcaddy.json, as bin/llmedge-xcaddy
	./scripts/xcaddy-build.sh $(BIN)/llmedge-xcaddy

clean:
	rm -rf $(BIN) .data
