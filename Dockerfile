# llmedge on the official Caddy image, built with xcaddy from xcaddy.json,
# run as an unprivileged user. With the shipped Caddyfile (the demo's) as is,
# its replicas on this host's 127.0.0.1:9101/9102 and 9201/9202 (e.g.
# `bin/llmsim -addr 127.0.0.1:9101 &`, one per port), on Linux:
#   docker build -t llmedge .
#   docker run --rm --network host -v "$PWD/Caddyfile:/etc/caddy/Caddyfile:ro" llmedge
# Without the host's network, publish the port and give replicas the
# container can reach (the Caddyfile reads them from the environment):
#   docker run --rm -p 8443:8443 -v "$PWD/Caddyfile:/etc/caddy/Caddyfile:ro" \
#     -e LLMEDGE_QWEN_REPLICAS="http://10.0.0.5:8000 http://10.0.0.6:8000" \
#     -e LLMEDGE_GEMMA_REPLICAS="http://10.0.0.7:8000" llmedge
# Its state (keys, the internal CA, the ledger) is in /var/lib/llmedge, a
# volume: give it one of yours (-v llmedge:/var/lib/llmedge) to keep it.
#
# The base images are pinned by digest (the multi-platform index), as the
# official images' records in github.com/docker-library/repo-info list
# them: repos/golang/remote/1.26-bookworm.md (Go 1.26.7, August 2026) and
# repos/caddy/remote/2.11.4-alpine.md (Alpine 3.23.6, September 2026). The
# tag before the digest is for readers; the digest is what is pulled. The
# Caddy image gives the run stage its Alpine, CA certificates and MIME
# types: its own caddy binary is replaced by ours (Caddy v2.11.9 with
# llmedge's modules), so its Caddy version does not matter. To move to
# newer images, read their digests and pass or write them:
#   docker buildx imagetools inspect golang:1.26-bookworm
#   docker buildx imagetools inspect caddy:2.11.4-alpine
#   docker build --build-arg GO_IMAGE=golang:1.26-bookworm@sha256:<digest> \
#     --build-arg CADDY_IMAGE=caddy:2.11.4-alpine@sha256:<digest> .
ARG GO_IMAGE=golang:1.26-bookworm@sha256:38f30937ff0751bd8c202e53556168b9093302ee6d591e7e65a9d1b84a9d360c
ARG CADDY_IMAGE=caddy:2.11.4-alpine@sha256:de23def33b17fb5d1290b0f6c2add1d70780e52341896c00a4c8a2a2fe9d355e

FROM ${GO_IMAGE} AS build
ENV GOTOOLCHAIN=local CGO_ENABLED=0
WORKDIR /src
COPY go.mod go.sum ./
COPY tools/xcaddy/go.mod tools/xcaddy/go.sum tools/xcaddy/
RUN go mod download && cd tools/xcaddy && go mod download
COPY . .
RUN ./scripts/xcaddy-build.sh /out/caddy

FROM ${CADDY_IMAGE}
COPY --from=build /out/caddy /usr/bin/caddy
# An unprivileged user owns the state; the gateway listens on 8443 (no
# privileged port, so no capability is needed). The binary carries no file
# capability either: under no_new_privs (Kubernetes'
# allowPrivilegeEscalation: false) a binary with one cannot be started.
RUN caddy list-modules | grep -q '^llmedge$' && \
	{ setcap -r /usr/bin/caddy 2>/dev/null || true; } && \
	addgroup -S -g 10001 llmedge && \
	adduser -S -D -H -u 10001 -G llmedge -h /var/lib/llmedge llmedge && \
	mkdir -p /var/lib/llmedge/caddy /var/lib/llmedge/config /var/lib/llmedge/data && \
	chown -R llmedge:llmedge /var/lib/llmedge
ENV LLMEDGE_DATA=/var/lib/llmedge/caddy \
	XDG_CONFIG_HOME=/var/lib/llmedge/config \
	XDG_DATA_HOME=/var/lib/llmedge/data \
	LLMEDGE_PORT=8443
VOLUME /var/lib/llmedge
USER llmedge:llmedge
EXPOSE 8443
# Liveness: /healthz over the gateway's own port (`caddy healthcheck`,
# llmedge's command: it needs no other tool in the image). Balancers and
# orchestrators that route traffic should probe /readyz instead.
HEALTHCHECK --interval=15s --timeout=5s --start-period=30s --retries=3 \
	CMD ["caddy", "healthcheck"]
# deploy/kubernetes/deployment.yaml writes this same line as its command.
CMD ["caddy", "run", "--config", "/etc/caddy/Caddyfile", "--adapter", "caddyfile"]
