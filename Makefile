# kgen: `make test` is what CI runs (.ci/run); it provisions the toolchain first.
SHELL := /bin/bash
GO ?= go
export KGEN_TOOLS ?= $(CURDIR)/.tools
# CuTe's conformance vectors for the layout algebra, shipped beside the checkout.
LAYOUT_VECTORS ?= $(abspath $(CURDIR)/../shared/testdata/layout)
PTXAS = $(KGEN_TOOLS)/py/nvidia/cu13/bin/ptxas
STATICCHECK = $(KGEN_TOOLS)/bin/staticcheck

.PHONY: all tools test test-go test-race test-layout test-examples test-cuda test-fuzz gen-check plot-check golden lint demo clean cuda-build gpu-test

all: test

## tools: install ptxas/nvlink (CUDA wheel), NVSHMEM 3.4.5 and LLVM 19 into .tools (idempotent)
tools:
	@bash scripts/tools.sh

## test: everything CI checks: lint, CGO-free build, all tests (golden PTX through ptxas)
test: tools lint gen-check test-go test-race test-layout test-examples test-cuda test-fuzz

test-go:
	CGO_ENABLED=0 $(GO) build ./...
	CGO_ENABLED=0 $(GO) test -count=1 -timeout 30m ./...

## test-race: the race detector over the packages that build kernels or run ranks from several
## goroutines (jit runs under it in test-cuda); about 28 minutes on 2 cores (kernels took
## 1655 s on 2026-11-29, so its bound is 45 minutes; the whole CI stays under 90)
test-race:
	CGO_ENABLED=1 $(GO) test -count=1 -race -timeout 45m ./dsl ./kernels ./collectives

## test-fuzz: every fuzzer for FUZZTIME each (seeded with small inputs; a failure writes its input under testdata/fuzz;
## scripts/fuzz.sh retries once Go 1.26's bare deadline race, go.dev/issue/75804)
FUZZTIME ?= 8s
FUZZERS = ./ptx:FuzzParse ./dsl:FuzzBuilder ./layout:FuzzParse ./layout:FuzzCompositionComplement \
	./layout:FuzzParseComposed ./nvshmem/devlib:FuzzParseLLVM ./nvshmem/devlib:FuzzParseDecls ./nvshmem/devlib:FuzzParseHeader
test-fuzz:
	@set -e; for f in $(FUZZERS); do pkg=$${f%%:*}; name=$${f##*:}; \
	  echo "fuzz $$pkg $$name ($(FUZZTIME))"; \
	  GO=$(GO) bash scripts/fuzz.sh $$pkg $$name $(FUZZTIME); done

test-layout:
	@if [ -d "$(LAYOUT_VECTORS)" ]; then \
	  LAYOUT_VECTORS="$(LAYOUT_VECTORS)" CGO_ENABLED=0 $(GO) test -count=1 ./layout -run TestConformance -v | grep -E '^(=== RUN|--- |ok|FAIL|PASS)|cases, '; \
	  exit $${PIPESTATUS[0]}; \
	elif [ "$$CI" = true ]; then echo "LAYOUT_VECTORS=$(LAYOUT_VECTORS) is missing" >&2; exit 1; \
	else echo "skipping CuTe conformance vectors: $(LAYOUT_VECTORS) not found"; fi

## test-examples: the examples as users run them: kgen launch with 4 simulated GPUs
test-examples:
	CGO_ENABLED=0 $(GO) build -o bin/kgen ./cmd/kgen
	CGO_ENABLED=0 $(GO) build -o bin/allreduce ./examples/allreduce
	CGO_ENABLED=0 $(GO) build -o bin/vadd ./examples/vadd
	bin/kgen launch -n 4 --backend emu -- bin/allreduce -n 20000 -steps 5
	bin/kgen launch -n 1 --backend emu -- bin/vadd -n 100000

## test-cuda: build and vet with the cuda tag (headers from PyPI, no GPU), and the race detector on jit
test-cuda: cuda-build
	CGO_ENABLED=1 $(GO) test -count=1 -race ./jit

## cuda-build: build, vet and staticcheck everything with the cuda tag (cuda.h from a PyPI wheel; no GPU or toolkit needed)
cuda-build:
	@bash scripts/tools.sh staticcheck
	eval "$$(bash scripts/cuda-headers.sh)" && $(GO) build -tags cuda ./... && $(GO) vet -tags cuda ./jit/... && \
	  $(STATICCHECK) -tags cuda ./...

## gpu-test: build the cuda-tagged GPU test binaries into .gpu/ and print the command that runs them
gpu-test: tools
	bash scripts/gpu-test.sh

## gen-check: regenerate every committed generated file (go generate: the examples, kernels/launch's host twins) and fail on any difference
gen-check:
	$(GO) generate ./examples/... ./kernels/launch
	@if [ -n "$$(git status --porcelain -- examples kernels/launch)" ]; then \
	  echo "generated files are stale; run go generate ./examples/... ./kernels/launch and commit:"; git status --short -- examples kernels/launch; git diff --stat -- examples kernels/launch; exit 1; fi

## plot-check: redraw docs/img/gemm-sm90.svg from docs/bench.md's GEMM tables and fail on any difference
plot-check:
	@tmp=$$(mktemp) && python3 scripts/bench/gemm_plot.py docs/bench.md $$tmp >/dev/null && \
	  if ! cmp -s $$tmp docs/img/gemm-sm90.svg; then rm -f $$tmp; \
	    echo "docs/img/gemm-sm90.svg is stale: python3 scripts/bench/gemm_plot.py docs/bench.md docs/img/gemm-sm90.svg"; exit 1; fi; rm -f $$tmp

## golden: regenerate the golden PTX files from the current code
golden: tools
	$(GO) test ./golden -update

## lint: gofmt, go vet and staticcheck (installed into .tools by scripts/tools.sh)
lint:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	CGO_ENABLED=0 $(GO) vet ./...
	@bash scripts/tools.sh staticcheck
	CGO_ENABLED=0 $(STATICCHECK) ./...

## demo: generate vector_add for sm_90 and assemble it with ptxas
demo: tools
	@mkdir -p bin
	$(GO) run ./cmd/kgen list
	$(GO) run ./cmd/kgen ptx vector_add --target sm_90 -o bin/vector_add.sm_90.ptx
	$(PTXAS) -arch=sm_90 -v bin/vector_add.sm_90.ptx -o bin/vector_add.sm_90.cubin
	@echo "demo: bin/vector_add.sm_90.ptx assembled by ptxas into bin/vector_add.sm_90.cubin"

clean:
	rm -rf bin
