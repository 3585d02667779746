# Convenience targets; every command also works without just.

build:
    CGO_ENABLED=0 go build -o bin/sandbox-agent ./cmd/sandbox-agent

run *ARGS:
    go run ./cmd/sandbox-agent server {{ARGS}}

# The README's test command; test-race (what .ci/run runs after it: every
# package but e2e under the race detector) needs a C compiler (cgo).
test:
    go test ./...

test-race:
    go test -race $(go list ./... | grep -v /e2e)

e2e:
    go test -count=1 ./e2e/...

lint:
    go vet ./...
    if command -v golangci-lint >/dev/null; then golangci-lint run; fi

# Side-by-side: this daemon, the reference server 0.4.2 (npm) and direct
# stdio, same mock agent, one run; prints the tables of docs/benchmarks.md.
bench *ARGS:
    go run ./e2e/cmd/benchcmp {{ARGS}}

# The Go benchmarks of every package.
bench-go:
    go test -run '^$' -bench . -benchmem ./...

# Mixed load for DURATION, reporting RSS, goroutines and descriptors.
soak DURATION="5m":
    go run ./e2e/cmd/soak -duration {{DURATION}}

fmt:
    gofmt -w $(git ls-files '*.go')
