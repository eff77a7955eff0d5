# The strata binary in a small image. docker compose up (compose.yaml) runs
# three brokers with MinIO; docker build -t strata . builds the image alone.

# Build: a static binary (no cgo), so the runtime image needs no libc.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/strata ./cmd/strata \
 && mkdir /out/data /out/certs

# Run: distroless static, as user nonroot (65532). It holds CA certificates
# (S3 over https) and time zones but no shell or package manager: little to
# patch or attack, a few MB beside the binary. Health checks therefore run
# strata itself (compose.yaml).
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/strata /usr/local/bin/strata
# An empty /data owned by nonroot: a new volume mounted there takes this
# owner, so the broker can write to it.
COPY --from=build --chown=65532:65532 /out/data /data
# Likewise /certs, where compose's certs service writes development
# certificates (strata dev certs).
COPY --from=build --chown=65532:65532 /out/certs /certs
VOLUME /data
ENV STRATA_DATA_DIR=/data
# gRPC, Raft, gossip (TCP and UDP), admin (health and metrics)
EXPOSE 7400 7401 7402 7402/udp 7403 9092
USER 65532:65532
ENTRYPOINT ["strata"]
CMD ["serve"]
