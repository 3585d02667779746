# Convenience targets; every command also works without just.

build:
    go build -o bin/sandbox-agent ./cmd/sandbox-agent

run *ARGS:
    go run ./cmd/sandbox-agent server {{ARGS}}

test:
    go test -race ./...

e2e:
    go test -count=1 ./e2e/...

lint:
    go vet ./...
    if command -v golangci-lint >/dev/null; then golangci-lint run; fi

bench:
    go test -run '^$' -bench . -benchmem ./...

fmt:
    gofmt -w $(git ls-files '*.go')
