# prsync: build, test, lint, demo and bench.
GO      ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X github.com/prsync/prsync/cli.Version=$(VERSION)

.PHONY: build test lint demo bench clean

build:
	$(GO) build -ldflags "$(LDFLAGS)" -o prsync .

test:
	bash scripts/test.sh

lint:
	$(GO) vet ./...
	command -v staticcheck >/dev/null || $(GO) install honnef.co/go/tools/cmd/staticcheck@v0.8.2
	PATH="$$PATH:$$($(GO) env GOPATH)/bin" staticcheck ./...

demo: build
	bash scripts/demo.sh

bench: build
	bash bench/run.sh

clean:
	rm -f prsync
