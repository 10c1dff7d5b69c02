# kgen: `make test` is what CI runs (.ci/run); it provisions the toolchain first.
SHELL := /bin/bash
GO ?= go
export KGEN_TOOLS ?= $(CURDIR)/.tools
# CuTe's conformance vectors for the layout algebra, shipped beside the checkout.
LAYOUT_VECTORS ?= $(abspath $(CURDIR)/../shared/testdata/layout)
PTXAS = $(KGEN_TOOLS)/py/nvidia/cu13/bin/ptxas

.PHONY: all tools test test-go test-layout golden lint demo clean

all: test

## tools: install ptxas/nvlink (CUDA wheel), NVSHMEM 3.4.5 and LLVM 19 into .tools (idempotent)
tools:
	@bash scripts/tools.sh

## test: everything CI checks: lint, CGO-free build, all tests (golden PTX through ptxas)
test: tools lint test-go test-layout

test-go:
	CGO_ENABLED=0 $(GO) build ./...
	CGO_ENABLED=0 $(GO) test -count=1 ./...

test-layout:
	@if [ -d "$(LAYOUT_VECTORS)" ]; then \
	  LAYOUT_VECTORS="$(LAYOUT_VECTORS)" CGO_ENABLED=0 $(GO) test -count=1 ./layout -run TestConformance -v | grep -E '^(=== RUN|--- |ok|FAIL|PASS)|conformance:'; \
	  exit $${PIPESTATUS[0]}; \
	elif [ "$$CI" = true ]; then echo "LAYOUT_VECTORS=$(LAYOUT_VECTORS) is missing" >&2; exit 1; \
	else echo "skipping CuTe conformance vectors: $(LAYOUT_VECTORS) not found"; fi

## golden: regenerate the golden PTX files from the current code
golden: tools
	$(GO) test ./golden -update

## lint: gofmt and go vet
lint:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	CGO_ENABLED=0 $(GO) vet ./...

## demo: generate vector_add for sm_90 and assemble it with ptxas
demo: tools
	@mkdir -p bin
	$(GO) run ./cmd/kgen list
	$(GO) run ./cmd/kgen ptx vector_add --target sm_90 -o bin/vector_add.sm_90.ptx
	$(PTXAS) -arch=sm_90 -v bin/vector_add.sm_90.ptx -o bin/vector_add.sm_90.cubin
	@echo "demo: bin/vector_add.sm_90.ptx assembled by ptxas into bin/vector_add.sm_90.cubin"

clean:
	rm -rf bin
