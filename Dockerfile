# llmedge on the official Caddy image, built with xcaddy from xcaddy.json.
#   docker build -t llmedge .
#   docker run -p 443:443 -v $PWD/Caddyfile:/etc/caddy/Caddyfile llmedge
FROM golang:1.26-bookworm AS build
ENV GOTOOLCHAIN=local CGO_ENABLED=0
WORKDIR /src
COPY go.mod go.sum ./
COPY tools/xcaddy/go.mod tools/xcaddy/go.sum tools/xcaddy/
RUN go mod download && cd tools/xcaddy && go mod download
COPY . .
RUN ./scripts/xcaddy-build.sh /out/caddy

FROM caddy:2.11.9
COPY --from=build /out/caddy /usr/bin/caddy
RUN caddy list-modules | grep -q '^llmedge$'
