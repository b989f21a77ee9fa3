// Scratch module of hack/cluster-images.sh: builds container images without a
// Docker engine (go-containerregistry), as docker-archives that
// `ctr -n k8s.io images import` reads. Never imported by the main module.
module github.com/agentrun-dev/agentrun/hack/images

go 1.25.0

require github.com/google/go-containerregistry v0.22.1

require (
	github.com/klauspost/compress v1.19.2 // indirect
	github.com/opencontainers/go-digest v1.0.0 // indirect
	github.com/opencontainers/image-spec v1.1.1 // indirect
)
