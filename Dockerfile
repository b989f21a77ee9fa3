# The agentrun manager: the AgentRun controller, and the chart's node
# profile installer (agentrun-node-profiles, run by its DaemonSet).
#   docker build -t agentrun-manager:0.1.0 .   # the tag: charts/agentrun/Chart.yaml appVersion
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o /out/manager ./cmd/manager \
 && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o /out/agentrun-node-profiles ./cmd/agentrun-node-profiles

# A static binary needs nothing but CA certificates (for the API server).
FROM scratch
COPY --from=build /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/
COPY --from=build /out/manager /manager
COPY --from=build /out/agentrun-node-profiles /agentrun-node-profiles
USER 65532:65532
ENTRYPOINT ["/manager"]
