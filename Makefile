# Sundial — developer commands. `make test` is exactly what CI runs.
SHELL := /bin/bash
GO ?= go
# Every package of the module but the Go code npm brings into web/node_modules.
PKGS := $(shell $(GO) list ./... 2>/dev/null | grep -v /node_modules/)

.PHONY: test deps test-deploy test-openapi test-sdk test-web web lint bench run build clean

## test: install what the tests need (scripts/install-deps.sh, as CI does), vet, every
## Go test with the race detector, then the dashboard's checks
## (test-web), the deploy checks, the OpenAPI check and the SDKs' suites (test-sdk), then the summaries. CI=true makes a test whose
## tool is missing fail rather than skip; the summary counts and names every skip.
## It does not rebuild the dashboard: the tests check that the committed build
## (web/dist/app) was made from the sources as they are (web/embed_test.go, npm test).
test: deps
	$(GO) vet $(PKGS)
	@set -o pipefail; CI=true $(GO) test -json -race -count=1 -timeout 25m $(PKGS) 2>&1 | \
		$(GO) run ./internal/testsummary -summary .test.summary; \
	status=$$?; \
	$(MAKE) --no-print-directory test-web; web=$$?; \
	echo "== web test summary: $$([ $$web = 0 ] && echo ok || echo FAIL) (eslint, tsc, vitest, build up to date, e2e)"; \
	$(MAKE) --no-print-directory test-deploy; deploy=$$?; \
	echo "== deploy checks summary: $$([ $$deploy = 0 ] && echo ok || echo FAIL) (Prometheus rules, Grafana dashboards, Dockerfile, docker-compose.yml, Helm chart)"; \
	$(MAKE) --no-print-directory test-openapi; openapi=$$?; \
	echo "== OpenAPI check summary: $$([ $$openapi = 0 ] && echo ok || echo FAIL) (the served document and real exchanges, by an independent 3.1 validator)"; \
	$(MAKE) --no-print-directory test-sdk; sdk=$$?; \
	echo "== sdk test summary: $$([ $$sdk = 0 ] && echo ok || echo FAIL) (python, typescript)"; \
	cat .test.summary 2>/dev/null || echo "== go test summary: no summary (go test or internal/testsummary did not run)"; \
	rm -f .test.summary; [ $$status = 0 ] && [ $$web = 0 ] && [ $$deploy = 0 ] && [ $$openapi = 0 ] && [ $$sdk = 0 ]

## deps: install what the tests need when missing (redis-server, PostgreSQL, Chromium,
## Node.js, Go modules, the FerretDB stand-in, helm, npm packages), or fail naming it
deps:
	@bash scripts/install-deps.sh

## web: rebuild the dashboard into web/dist/app when its sources changed since the
## build (web/dist/sources.sha256), after npm ci when package-lock.json changed. The
## build is committed (the API binary embeds it, so go build and go install serve it
## with no Node): commit web/dist with the change. Without Node the committed build is used.
web:
	@if command -v node >/dev/null && node web/scripts/sources.mjs check >/dev/null 2>&1; then \
		echo "web/dist/app is built from web/ as it is"; \
	elif ! command -v npm >/dev/null; then \
		echo "npm not found: the committed web/dist/app is used (install Node.js 20+ to rebuild the dashboard)"; \
	else \
		$(MAKE) --no-print-directory web/node_modules/.package-lock.json && cd web && npm run build; \
	fi
web/node_modules/.package-lock.json: web/package-lock.json
	@command -v npm >/dev/null || { echo "npm not found: install Node.js 20+ to build the dashboard (web/)"; exit 1; }
	cd web && npm ci --no-audit --no-fund

## test-web: the dashboard's checks: eslint, tsc, vitest and whether web/dist/app is
## built from the sources as they are (npm test), then the end-to-end run in Chromium
## against a real stack (web/e2e/run.mjs)
test-web: web/node_modules/.package-lock.json
	cd web && npm run lint && npm run typecheck && npm test && npm run e2e

## test-deploy: the Prometheus alert rules (promtool check rules, promtool test rules with
## deploy/prometheus/sundial-rules.test.yaml), the Grafana dashboards against @grafana/schema's
## Dashboard type (tools/grafanacheck, tsc), then offline checks of the Dockerfile
## (BuildKit's lint), docker-compose.yml (compose-go) and the Helm chart (helm lint --strict,
## helm template with each values file, strict decoding against the Kubernetes API types);
## builds a pinned helm once
test-deploy:
	@command -v promtool >/dev/null || { echo "promtool not found: run make deps (Debian's prometheus package)"; exit 1; }
	promtool check rules deploy/prometheus/sundial-rules.yaml
	cd deploy/prometheus && promtool test rules sundial-rules.test.yaml
	cd tools/grafanacheck && npm test --silent
	@export HELM=$$(bash scripts/install-helm.sh) && cd tools/deploycheck && \
	CGO_ENABLED=0 $(GO) vet ./... && CGO_ENABLED=0 $(GO) test -count=1 ./...

## test-openapi: the API's OpenAPI document through an independent OpenAPI 3.1 validator
## (pb33f/libopenapi-validator): the served document, and real exchanges with an API over a
## real redis-server, requests and answers (tools/openapicheck, its own module)
test-openapi:
	cd tools/openapicheck && $(GO) vet ./... && $(GO) test -race -count=1 ./...

## test-sdk: the Python and TypeScript SDKs (sdk/): npm ci in sdk/typescript when its lock file
## changed, then internal/sdktest builds the API and runs each SDK's own suite (unittest in a fresh
## venv the package is pip-installed into; tsc and node --test) against it, a poller and a redis-server
test-sdk:
	@if [ ! sdk/typescript/node_modules/.package-lock.json -nt sdk/typescript/package-lock.json ]; then \
		command -v npm >/dev/null || { echo "npm not found: install Node.js 18+ for the TypeScript SDK (sdk/typescript)"; exit 1; }; \
		echo "cd sdk/typescript && npm ci"; cd sdk/typescript && npm ci --no-audit --no-fund; fi
	$(GO) vet -tags sdktest ./internal/sdktest
	$(GO) test -tags sdktest -count=1 -v -timeout 20m ./internal/sdktest

## lint: gofmt, go vet, staticcheck
lint:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || (gofmt -l $$(git ls-files '*.go'); exit 1)
	$(GO) vet $(PKGS)
	$(GO) run honnef.co/go/tools/cmd/staticcheck@latest $(PKGS)

## bench: the engine's benchmarks (numbers for the issue notes)
bench:
	$(GO) test -run '^$$' -bench . -benchmem $(PKGS)

## run: the whole local stack (Redis, MongoDB stand-in, API with the dashboard, poller, workers)
run: web
	bash scripts/dev.sh

## build: every binary into ./bin
build: web
	mkdir -p bin
	$(GO) build -o bin/ ./services/... ./cmd/...

clean:
	rm -rf bin .local
