# prsync: build, test, test-full, test-busy, lint, demo, bench, docs and release.
GO      ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT  ?= $(shell git rev-parse HEAD 2>/dev/null)
DATE    ?= $(shell date -u +%Y-%m-%dT%H:%M:%SZ)
# the man page's date is the last commit's, so that regenerating it changes nothing
DOCDATE ?= $(shell git log -1 --format=%cs 2>/dev/null)
LDFLAGS := -X github.com/prsync/prsync/cli.Version=$(VERSION) -X github.com/prsync/prsync/cli.Commit=$(COMMIT) -X github.com/prsync/prsync/cli.Date=$(DATE)
DOCS     = $(GO) run ./internal/docgen/cmd/prsync-docs -version=$(VERSION) -date=$(DOCDATE)
GOBIN    = $(shell $(GO) env GOPATH)/bin

.PHONY: build test test-full test-busy lint demo bench clean man completions docs release deb-test readme-check

build:
	$(GO) build -ldflags "$(LDFLAGS)" -o prsync .

test:
	bash scripts/test.sh

# make test, with the direct-transport pass over every copy, fault, truth and verify test and
# the randomised tests at more rounds (PRSYNC_TEST_FULL=1): about twice make test's time
test-full:
	PRSYNC_TEST_FULL=1 bash scripts/test.sh

# every command of README.md's Set-up, Install and Examples sections, run (tests/readme_test.go;
# make test runs it too)
readme-check:
	$(GO) test -count=1 -run '^TestReadme$$' ./tests/

# the same suite with a CPU hog on every core (nproc busy loops, started and stopped by
# scripts/test-busy.sh by their PIDs), as on a shared CI machine; not part of .ci/run
test-busy:
	bash scripts/test-busy.sh

lint:
	$(GO) vet ./...
	command -v staticcheck >/dev/null || $(GO) install honnef.co/go/tools/cmd/staticcheck@v0.8.2
	PATH="$$PATH:$$($(GO) env GOPATH)/bin" staticcheck ./...

demo: build
	bash scripts/demo.sh

bench: build
	bash bench/run.sh

# man/prsync.1 (and .gz) and completions/: generated from the flags and README.md, not committed
man:
	$(DOCS) -man man/prsync.1

completions:
	$(DOCS) -completions completions

docs: man completions

# goreleaser check, then a snapshot release into dist/: archives, checksums, .deb, .rpm and
# the Homebrew cask, nothing published (scripts/release-test.sh checks the packages in CI).
# goreleaser gives up on git (no commit, no date in the binaries) in a clone without a
# remote, so such a clone gets the project's URL for the run.
release:
	PATH="$$PATH:$(GOBIN)"; command -v goreleaser >/dev/null || $(GO) install github.com/goreleaser/goreleaser/v2@v2.15.1
	PATH="$$PATH:$(GOBIN)" goreleaser check
	git remote | grep -q . || export GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=remote.origin.url GIT_CONFIG_VALUE_0=https://github.com/prsync/prsync.git; \
	PATH="$$PATH:$(GOBIN)" goreleaser release --snapshot --clean --skip=publish

# build, install, check and remove the .deb (root, Debian/Ubuntu)
deb-test:
	bash scripts/deb-test.sh

clean:
	rm -f prsync man/prsync.1 man/prsync.1.gz
	rm -rf completions dist
