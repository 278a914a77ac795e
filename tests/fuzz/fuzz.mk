# tests/fuzz/fuzz.mk: the libFuzzer harnesses (tests/fuzz/fuzz_*.c), built
# with clang, -fsanitize=fuzzer,address,undefined. Included by the Makefile;
# not part of `make test`.
#
#   make fuzz          build the harnesses, the seeds and dictionaries, then run
#                      each harness for FUZZ_SECONDS (default 120) with one job
#   make fuzz-build    only build them (build/fuzz/fuzz_load, fuzz_run, fuzz_diff, fuzz_asm,
#                      fuzz_npy, fuzz_hexcase, fuzz_extend)
#
# fuzz_npy and fuzz_hexcase drive the CLI's own parsers (cli/npy.c,
# cli/hexcase.c); fuzz_hexcase links only its parser, fuzz_npy the library
# too (cli/npy.c also gives inputs to a VM). Their seeds are the hex cases themselves (hexcase) and .npy files
# written by make_seeds.py (npy); their dictionaries are tests/fuzz/*.dict.
# tests/fuzz/README lists every harness, how to run it and what has run.
#
# The library is compiled again for the fuzz build ($(BUILD)/fuzz/obj), CPU
# executor only, with the mimalloc calls mapped onto the C allocator
# (tests/fuzz/mimalloc_shim.c) so ASan watches linear memory and tensor
# buffers. Corpora grow in $(BUILD)/fuzz/corpus/<harness>; crashers land in
# $(BUILD)/fuzz/crashes/<harness>. Each harness runs as one process
# (-fork=1: a crash or timeout is saved and fuzzing goes on).
#
# Triage: crashers are valid .bib files (the harness mutator fixes the
# checksum), so `build/bib dis FILE` shows them. Under ASan and coverage the
# tensor kernels run 20-50 times slower, so a timeout is a bug only if
# `build/bib run --fuel 100000 --max-memory 64M --threads 1 FILE` is slow too.

FUZZ_CC      ?= clang
FUZZ_SECONDS ?= 120
FUZZ_DIR      = $(BUILD)/fuzz
FUZZ_SAN      = -fsanitize=address,undefined -fno-sanitize-recover=undefined
FUZZ_CFLAGS   = $(CSTD) -O1 -g -Wall -Wextra $(FPFLAGS) -Iinclude -I. -DBIB_EXECUTORS='"cpu"' \
                $(FUZZ_SAN) -fsanitize=fuzzer-no-link -MMD -MP
FUZZ_LDLIBS   = -lz -lm -lpthread -ldl $(SHADERC_LIBS)
FUZZ_LIB_OBJ  = $(LIB_SRC:%.c=$(FUZZ_DIR)/obj/%.o) $(FUZZ_DIR)/obj/tests/fuzz/mimalloc_shim.o
FUZZ_NAMES    = load run diff asm npy hexcase extend
FUZZ_BINS     = $(FUZZ_NAMES:%=$(FUZZ_DIR)/fuzz_%)

$(FUZZ_DIR)/obj/%_avx2.o:   FUZZ_CFLAGS += -mavx2 -mfma
$(FUZZ_DIR)/obj/%_avx512.o: FUZZ_CFLAGS += -mavx512f -mavx512dq -mavx512bw -mavx512vl -mfma

$(FUZZ_DIR)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -c $< -o $@

$(FUZZ_DIR)/libbib_fuzz.a: $(FUZZ_LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

# The parser harnesses: their parser, compiled with coverage.
# cli/npy.c also gives inputs to a VM (bib_npy_set_input), so fuzz_npy links
# the fuzz build of the library too, for the linker's sake.
$(FUZZ_DIR)/fuzz_npy: tests/fuzz/fuzz_npy.c $(FUZZ_DIR)/obj/cli/npy.o $(FUZZ_DIR)/libbib_fuzz.a
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer -o $@ $^ $(FUZZ_LDLIBS)

$(FUZZ_DIR)/fuzz_hexcase: tests/fuzz/fuzz_hexcase.c $(FUZZ_DIR)/obj/cli/hexcase.o
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer -o $@ $^

$(FUZZ_DIR)/fuzz_%: tests/fuzz/fuzz_%.c tests/fuzz/fuzz_common.h $(FUZZ_DIR)/libbib_fuzz.a
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer -o $@ $< $(FUZZ_DIR)/libbib_fuzz.a $(FUZZ_LDLIBS)

$(FUZZ_DIR)/.seeds: tests/fuzz/make_seeds.py $(BUILD)/bib $(wildcard tests/hex/*/*.hex)
	@rm -rf $(FUZZ_DIR)/seeds
	$(PYTHON) tests/fuzz/make_seeds.py $(BUILD)/bib $(FUZZ_DIR)
	@touch $@

.PHONY: fuzz fuzz-build
fuzz-build: $(FUZZ_BINS) $(FUZZ_DIR)/.seeds

# Each harness runs from $(FUZZ_DIR)/work, so file names the assembler meets
# in fuzzed text resolve to nothing of the tree's.
fuzz: fuzz-build
	@set -e; for h in $(FUZZ_NAMES); do \
	  mkdir -p $(FUZZ_DIR)/corpus/$$h $(FUZZ_DIR)/crashes/$$h $(FUZZ_DIR)/work; \
	  case $$h in asm) seeds=basm; dict=basm.dict ;; npy) seeds=npy; dict=npy.dict ;; \
	    hexcase) seeds=hexcase; dict=hexcase.dict ;; *) seeds=bib; dict=bib.dict ;; esac; \
	  echo "==== fuzz_$$h for $(FUZZ_SECONDS) s"; \
	  (cd $(FUZZ_DIR)/work && ../fuzz_$$h -fork=1 -ignore_crashes=1 -ignore_timeouts=1 \
	     -ignore_ooms=1 -max_total_time=$(FUZZ_SECONDS) -timeout=20 -rss_limit_mb=4096 -max_len=65536 -print_final_stats=1 \
	     -dict=../$$dict -artifact_prefix=../crashes/$$h/ ../corpus/$$h ../seeds/$$seeds); \
	done

-include $(shell find $(FUZZ_DIR)/obj -name '*.d' 2>/dev/null)
