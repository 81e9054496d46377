# Sundial — developer commands. `make test` is exactly what CI runs.
SHELL := /bin/bash
GO ?= go
PKGS := ./...

.PHONY: test lint bench run build clean

## test: vet, then every test with the race detector, then a summary
test:
	$(GO) vet $(PKGS)
	@set -o pipefail; $(GO) test -race -count=1 -timeout 25m $(PKGS) 2>&1 | tee .test.log; \
	status=$$?; \
	echo "== go test summary: $$(grep -c '^ok' .test.log) packages ok, $$(grep -c '^FAIL' .test.log) FAIL lines, $$(grep -c 'no test files' .test.log) without tests"; \
	rm -f .test.log; exit $$status

## lint: gofmt, go vet, staticcheck
lint:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || (gofmt -l $$(git ls-files '*.go'); exit 1)
	$(GO) vet $(PKGS)
	$(GO) run honnef.co/go/tools/cmd/staticcheck@latest $(PKGS)

## bench: the engine's benchmarks (numbers for the issue notes)
bench:
	$(GO) test -run '^$$' -bench . -benchmem $(PKGS)

## run: the whole local stack (Redis, MongoDB stand-in, API, poller, workers)
run:
	bash scripts/dev.sh

## build: every binary into ./bin
build:
	mkdir -p bin
	$(GO) build -o bin/ ./services/... ./cmd/...

clean:
	rm -rf bin .local
