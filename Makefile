# Sundial — developer commands. `make test` is exactly what CI runs.
SHELL := /bin/bash
GO ?= go
PKGS := ./...

.PHONY: test test-deploy lint bench run build clean

## test: vet, then every test with the race detector, then a summary
test:
	$(GO) vet $(PKGS)
	@set -o pipefail; $(GO) test -race -count=1 -timeout 25m $(PKGS) 2>&1 | tee .test.log; \
	status=$$?; \
	$(MAKE) --no-print-directory test-deploy; deploy=$$?; \
	echo "== deploy checks summary: $$([ $$deploy = 0 ] && echo ok || echo FAIL) (Dockerfile, docker-compose.yml, Helm chart)"; \
	echo "== go test summary: $$(grep -c '^ok' .test.log) packages ok, $$(grep -c '^FAIL' .test.log) FAIL lines, $$(grep -c 'no test files' .test.log) without tests"; \
	rm -f .test.log; [ $$status = 0 ] && [ $$deploy = 0 ]

## test-deploy: offline checks of the Dockerfile (BuildKit's lint), docker-compose.yml
## (compose-go) and the Helm chart (helm lint --strict, helm template with each values
## file, strict decoding against the Kubernetes API types); builds a pinned helm once
test-deploy:
	@export HELM=$$(bash scripts/install-helm.sh) && cd tools/deploycheck && \
	CGO_ENABLED=0 $(GO) vet ./... && CGO_ENABLED=0 $(GO) test -count=1 ./...

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
