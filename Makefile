# gquant: the two commands of the README.
#   make demo   the main job on the bundled model (stories260k): calibrate, convert to GGUF and to
#               gqf (w8a16, for NPUs), verify every artifact against the bf16 checkpoint on
#               held-out text (fails if too far), export ONNX QDQ, the NPU deployment graphs
#               (prompt and token over a KV cache) and AIMET encodings
#   make test   everything CI runs: vet, unit tests (asm and pure Go, GOAMD64 v1 and v3), the
#               interop tests against stock llama.cpp (node-llama-cpp) and 100,000 executions
#               of each fuzz target

GO        ?= go
NPM_DIR   := .cache/npm
NODE_MODS := $(CURDIR)/$(NPM_DIR)/node_modules
MODEL     ?= testdata/models/stories260k
CALIB     ?= testdata/corpora/tinystories-calib.txt
EVAL      ?= testdata/corpora/tinystories-eval.txt
OUT       ?= out
export GQUANT_NODE_MODULES := $(NODE_MODS)

.PHONY: demo test build npm-deps vet clean device-build fuzz

build:
	$(GO) build -o bin/gquant ./cmd/gquant

# Binaries for .ci/amx-device, the AMX checks on a machine with AMX (no Go toolchain needed there).
device-build:
	@mkdir -p bin/device
	$(GO) build -o bin/device/gquant ./cmd/gquant
	$(GO) build -o bin/device/gquant-synth ./cmd/gquant-synth
	$(GO) test -c -o bin/device/kernels.test ./runtime/kernels
	$(GO) test -c -o bin/device/runtime.test ./runtime

demo: build
	@mkdir -p $(OUT)
	./bin/gquant convert $(MODEL) --scheme q4_k_m --dry-run
	./bin/gquant calibrate $(MODEL) --corpus $(CALIB) --ctx 256 --tokens 8192 -o $(OUT)/stats.gguf --force
	./bin/gquant convert $(MODEL) -o $(OUT)/stories260k-q8_0.gguf --scheme q8_0 --force
	./bin/gquant convert $(MODEL) -o $(OUT)/stories260k-q4_k_m.gguf --scheme q4_k_m --stats $(OUT)/stats.gguf --force
	./bin/gquant inspect $(OUT)/stories260k-q4_k_m.gguf
	./bin/gquant run $(OUT)/stories260k-q8_0.gguf "Once upon a time" -n 32
	./bin/gquant verify $(OUT)/stories260k-q8_0.gguf --ref $(MODEL) --corpus $(EVAL) --ctx 256 \
		--save-ref $(OUT)/ref.kld --min-snr 30 --json $(OUT)/verify-q8_0.json --force
	./bin/gquant verify $(OUT)/stories260k-q4_k_m.gguf --ref-logits $(OUT)/ref.kld \
		--max-kl 0.2 --json $(OUT)/verify-q4_k_m.json --plot $(OUT)/verify-q4_k_m.png --force
	./bin/gquant convert $(MODEL) -o $(OUT)/stories260k-w8a16.gqf --format gqf --scheme w8a16 \
		--stats $(OUT)/stats.gguf --corpus $(CALIB) --force
	./bin/gquant verify $(OUT)/stories260k-w8a16.gqf --ref-logits $(OUT)/ref.kld --min-snr 35 \
		--json $(OUT)/verify-w8a16.json --force
	./bin/gquant export $(OUT)/stories260k-w8a16.gqf --to onnx --qdq -o $(OUT)/stories260k-w8a16.onnx --force
	./bin/gquant export $(OUT)/stories260k-w8a16.gqf --to onnx-kv --qdq --ar 32 --ctx 256 --parts 2 \
		-o $(OUT)/stories260k-w8a16-kv --force
	./bin/gquant export $(OUT)/stories260k-w8a16.gqf --to aimet-json -o $(OUT)/stories260k-w8a16.encodings.json --force

# Peers for the interop tests, pinned in testdata/interop/package.json. Only llama.cpp's CPU
# backend is installed (--omit=optional skips the CUDA and Vulkan builds).
npm-deps: $(NPM_DIR)/.installed
$(NPM_DIR)/.installed: testdata/interop/package.json
	@mkdir -p $(NPM_DIR)
	cp testdata/interop/package.json $(NPM_DIR)/package.json
	cd $(NPM_DIR) && npm install --no-audit --no-fund --omit=optional --ignore-scripts
	@touch $@

vet:
	$(GO) vet ./...
	@files=$$(gofmt -l $$(git ls-files '*.go')); test -z "$$files" || (echo "gofmt needed: $$files"; exit 1)

test: vet npm-deps
	GQUANT_REQUIRE_PEERS=1 $(GO) test -count=1 ./...
	$(GO) test -count=1 -tags purego ./quantize/... ./runtime/...
	GOAMD64=v1 $(GO) test -count=1 ./quantize/... ./runtime/... ./formats/... ./convert/...
	$(MAKE) fuzz

# Each fuzz target for FUZZTIME executions (6–36 s each here, 2 min in all with the builds). A count, not a duration:
# with a duration Go 1.26's coordinator can report "context deadline exceeded" as a failure at
# the deadline with no failing input (golang/go#75804, fixed in Go 1.27). -fuzzminimizetime
# bounds the minimisation of a seed that grows coverage, so the budget goes to fuzzing (the gqf
# and imatrix targets spent it all minimising before).
FUZZTIME    ?= 100000x
FUZZ_TARGETS := formats/gguf:FuzzOpen formats/safetensors:FuzzHeader formats/hf:FuzzConfig \
	formats/tokenizer:FuzzEncode formats/tokenizer:FuzzParse formats/imatrix:FuzzParse formats/gqf:FuzzParse
fuzz:
	@set -e; for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; fn=$${t##*:}; echo "fuzz $$pkg $$fn ($(FUZZTIME))"; \
		$(GO) test -run '^$$' -fuzz "^$$fn$$" -fuzztime $(FUZZTIME) -fuzzminimizetime 1s ./$$pkg; \
	done

clean:
	rm -rf bin $(OUT)
