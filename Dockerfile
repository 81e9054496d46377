# syntax=docker/dockerfile:1
# One image for all of Sundial: the api, worker and poller binaries, the
# sundial CLI and sundial-probe (health checks), static, on distroless, as a
# non-root user. A Deployment or compose service picks its binary with its
# command (api, worker or poller). docs/deploy.md explains the choice.
#
#   docker build -t sundial .
#   docker run --rm sundial api        # or worker, poller, sundial, sundial-probe

ARG GO_VERSION=1.26.8
ARG NODE_VERSION=22

# The dashboard (web/, React + Vite): built once here, embedded into the api
# binary by the Go package github.com/sundialhq/sundial/web.
FROM node:${NODE_VERSION}-bookworm-slim AS web
WORKDIR /src/web
COPY web/package.json web/package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY web/ ./
RUN npm run build

FROM golang:${GO_VERSION}-bookworm AS build
WORKDIR /src
ENV CGO_ENABLED=0 GOFLAGS=-trimpath
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/root/go/pkg/mod go mod download
COPY . .
COPY --from=web /src/web/dist/app ./web/dist/app
RUN --mount=type=cache,target=/root/go/pkg/mod \
    --mount=type=cache,target=/root/.cache/go-build \
    go build -ldflags="-s -w" -o /out/ \
      ./services/api ./services/worker ./services/poller ./cmd/sundial ./cmd/sundial-probe

# distroless/static: CA certificates, time zones and a nonroot user (65532),
# no shell, no package manager.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/ /usr/local/bin/
USER 65532:65532
# Inside a container the API listens on every interface.
ENV SUNDIAL_HTTP_ADDR=0.0.0.0:8080 \
    SUNDIAL_LOG_FORMAT=json
EXPOSE 8080
CMD ["/usr/local/bin/api"]
