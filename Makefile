# BIB: build, test, bench.
#   make            build build/bib, build/libbib.a, build/libbib.so
#   make demo       install what is missing, build, run the examples
#   make digits     train a digits classifier with torch, import it, run it with bib
#   make generate   train a small GPT with torch, generate text through its cache with bib
#   make test       every test: unit (Criterion), spec-check, hex suites, oracle,
#                   and the same again under ASan and UBSan (make sanitize)
#   make bench      benchmarks beside their peers (Lua 5.4, oneDNN, OpenBLAS)
#   make deps       install missing Debian packages (run by the targets above)
#   make install    install under PREFIX (/usr/local), DESTDIR honoured; make uninstall
#   make fresh-check  the two commands above in a fresh Debian 12 root (mmdebstrap)

.DEFAULT_GOAL := all
CC      ?= gcc
BUILD   ?= build
PYTHON  ?= /usr/bin/python3
CSTD     = -std=c11 -D_GNU_SOURCE
WARN     = -Wall -Wextra -Werror
OPT     ?= -O2
# The numerics contract: no contraction, no fast-math; fma only where written.
FPFLAGS  = -ffp-contract=off -fno-fast-math
CFLAGS  += $(CSTD) $(OPT) $(WARN) $(FPFLAGS) -fPIC -MMD -MP -Iinclude -I.
LDLIBS  += -lmimalloc -lz -lm -lpthread -ldl
# libshaderc compiles the GLSL of .shader lines (assembler/devcode.c). Debian's
# libshaderc.so is built against another glslang than its static archives, so
# the static shaderc is linked with them (the shared one crashes in GlslangToSpv).
SHADERC_LIBS ?= -Wl,--start-group -lshaderc_combined -lglslang -lMachineIndependent -lGenericCodeGen \
                -lOSDependent -lOGLCompiler -lSPIRV -lSPIRV-Tools-opt -lSPIRV-Tools \
                -lglslang-default-resource-limits -Wl,--end-group -lstdc++
LDLIBS  += $(SHADERC_LIBS)

# A carried dependency kit (tools/gpu-kit.sh) for a machine with no Debian
# packages and no registry: its headers and libraries join the build, its
# programs (glslc) and layers the environment, and nothing is installed.
ifneq ($(KIT),)
KIT_LIB       = $(KIT)/usr/lib/x86_64-linux-gnu
CFLAGS       += -isystem $(KIT)/usr/include
KIT_LDFLAGS   = -L$(KIT_LIB) -Wl,--disable-new-dtags,-rpath,$(KIT_LIB)
LDLIBS       += $(KIT_LDFLAGS)
export PATH              := $(KIT)/usr/bin:$(PATH)
export LD_LIBRARY_PATH   := $(KIT_LIB)$(if $(LD_LIBRARY_PATH),:$(LD_LIBRARY_PATH))
export VK_ADD_LAYER_PATH := $(KIT)/usr/share/vulkan/explicit_layer.d
endif

# The version is the header's; the soname carries its major number.
VERSION := $(shell sed -n 's/^\#define BIB_VERSION_STRING "\(.*\)"/\1/p' include/bib.h)
SOMAJOR  = $(firstword $(subst ., ,$(VERSION)))
SONAME   = libbib.so.$(SOMAJOR)

LIB_DIRS = isa module vm assembler backends backends/cpu backends/null
LIB_SRC  = $(foreach d,$(LIB_DIRS),$(wildcard $(d)/*.c))
LIB_OBJ  = $(LIB_SRC:%.c=$(BUILD)/obj/%.o)
# Executor fragments add their objects (and generated sources) to LIB_OBJ,
# their libraries to LDLIBS and their feature names to EXECUTORS.
EXECUTORS = cpu
-include backends/vulkan/vulkan.mk
-include backends/cuda/cuda.mk
-include tests/fuzz/fuzz.mk
CFLAGS  += -DBIB_EXECUTORS='"$(EXECUTORS)"'
# The library exports only what include/bib.h marks BIB_API.
LIB_VISIBILITY = -fvisibility=hidden
$(LIB_OBJ): CFLAGS += $(LIB_VISIBILITY)

# SANITIZE=1 (with its own BUILD; `make sanitize` sets both): everything again
# under AddressSanitizer and UBSan, with mimalloc's few entry points mapped
# onto the C allocator (tests/fuzz/mimalloc_shim.c) so that ASan puts
# redzones around linear memory and every tensor buffer.
# SANITIZE=1 or DEBUG=1: fresh tensor buffers start poisoned (BIB_POISON,
# vm/tensor.c), so an output a kernel leaves unwritten shows in the tests.
ifneq ($(SANITIZE)$(DEBUG),)
CFLAGS   += -DBIB_POISON
endif
ifneq ($(DEBUG),)
OPT       = -O0 -g
endif
ifneq ($(SANITIZE),)
SAN_FLAGS = -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer -g
CFLAGS   += $(SAN_FLAGS)
LDLIBS   := $(SAN_FLAGS) $(LDLIBS)
LIB_OBJ  += $(BUILD)/obj/tests/fuzz/mimalloc_shim.o
endif
CLI_SRC  = $(wildcard cli/*.c)
CLI_OBJ  = $(CLI_SRC:%.c=$(BUILD)/obj/%.o)
UNIT_SRC = $(wildcard tests/unit/*.c)
UNIT_BIN = $(UNIT_SRC:tests/unit/%.c=$(BUILD)/tests/%)

# Kernels compiled for one SIMD level each; the CPU executor picks at run time.
$(BUILD)/obj/%_avx2.o:   CFLAGS += -mavx2 -mfma
$(BUILD)/obj/%_avx512.o: CFLAGS += -mavx512f -mavx512dq -mavx512bw -mavx512vl -mfma
# The dtype kernels are plain loops of integer operations, compares and exact
# conversions: vectorized (SSE2, any x86-64) they give the same bits, faster.
$(BUILD)/obj/backends/cpu/ops_dtypes.o: CFLAGS += -ftree-vectorize -fvect-cost-model=dynamic

.PHONY: all deps demo digits generate fresh-check test test-bins sanitize unit spec spec-check hex bench clean format format-check
all: $(BUILD)/.deps $(BUILD)/bib $(BUILD)/libbib.a $(BUILD)/libbib.so $(BUILD)/$(SONAME) \
     $(BUILD)/$(GLSL_PLUGIN) $(BUILD)/.kernels-checked

# ---- dependencies ---------------------------------------------------------
# g++ brings libstdc++-12-dev, which the static shaderc links against; pkgconf
# is what tests/cli/install.sh builds examples/embed.c with. The ONNX importer
# (tools/bib-onnx) runs on python3-onnx; its tests run the ONNX node tests
# (libonnx-testdata) and models exported from python3-torch, and
# examples/digits trains on python3-sklearn's bundled digits.
DEB_PACKAGES = libmimalloc-dev zlib1g-dev libcriterion-dev libopenblas-dev lua5.4 python3-numpy \
               libvulkan-dev glslc libshaderc-dev mesa-vulkan-drivers vulkan-validationlayers \
               libedit-dev gnuplot-nox clang-format g++ pkgconf \
               openmpi-bin libopenmpi-dev mpich \
               python3-onnx libonnx-testdata python3-torch python3-sklearn
# Only `make bench` needs these: the peers its benchmarks run beside.
BENCH_DEB_PACKAGES = libdnnl-dev luajit libmpich-dev
$(BUILD)/.bench-deps: tools/install-deps.sh | $(BUILD)/.deps
	@$(if $(KIT),echo "bench deps: from the kit in $(KIT)",sh tools/install-deps.sh $(BENCH_DEB_PACKAGES))
	@touch $@
$(BUILD)/.deps: tools/install-deps.sh
	@mkdir -p $(BUILD)
	@$(if $(KIT),echo "deps: from the kit in $(KIT)",sh tools/install-deps.sh $(DEB_PACKAGES))
	@touch $@
deps:
	@sh tools/install-deps.sh $(DEB_PACKAGES)

# ---- library and CLI --------------------------------------------------------
$(BUILD)/obj/%.o: %.c $(BUILD)/.flags | $(BUILD)/.deps
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

$(BUILD)/libbib.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

# The shared library: libbib.so.MAJOR.MINOR.PATCH, soname libbib.so.MAJOR.
# --exclude-libs keeps the symbols of the static shaderc and glslang inside.
SO_LDFLAGS = -shared -Wl,-soname,$(SONAME) -Wl,--exclude-libs,ALL -Wl,--no-undefined \
             -Wl,--gc-sections -Wl,-O1
# It holds no shader compiler: GLSL in a .basm file is compiled by
# libbib-glsl.so.MAJOR (assembler/glsl.c with the static shaderc, several MB
# of C++), which libbib.so loads from beside itself ($ORIGIN) on first use.
# libbib.a keeps glsl.c inside, so static programs need nothing at run time.
# libmimalloc comes last among its dependencies: libbib calls mi_* by name,
# and mimalloc also defines operator new and delete, which take the place of
# libstdc++'s own for any C++ library that follows it there (when libbib.so
# still held the shader compiler, lavapipe's LLVM then crashed in a Python
# process, freeing with free what mimalloc had allocated).
GLSL_PLUGIN = libbib-glsl.so.$(SOMAJOR)
CFLAGS     += -DBIB_GLSL_LIBRARY='"$(GLSL_PLUGIN)"'
SO_OBJ      = $(filter-out $(BUILD)/obj/assembler/devcode.o $(BUILD)/obj/assembler/glsl.o,$(LIB_OBJ)) \
              $(BUILD)/obj/assembler/devcode_plugin.o
$(BUILD)/obj/assembler/devcode_plugin.o: assembler/devcode.c $(BUILD)/.flags | $(BUILD)/.deps
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -fvisibility=hidden -DBIB_GLSL_PLUGIN -c $< -o $@
$(BUILD)/libbib.so.$(VERSION): $(SO_OBJ) | $(BUILD)/$(GLSL_PLUGIN)
	$(CC) $(SO_LDFLAGS) -Wl,-rpath,'$$ORIGIN' -o $@ $(SO_OBJ) \
	    $(filter-out $(SHADERC_LIBS) -lmimalloc,$(LDLIBS)) -lmimalloc
$(BUILD)/$(GLSL_PLUGIN): $(BUILD)/obj/assembler/glsl.o
	$(CC) $(SO_LDFLAGS:-Wl,-soname,$(SONAME)=-Wl,-soname,$(GLSL_PLUGIN)) -o $@ $^ $(SAN_FLAGS) \
	    $(KIT_LDFLAGS) $(SHADERC_LIBS) -lm
$(BUILD)/$(SONAME) $(BUILD)/libbib.so: $(BUILD)/libbib.so.$(VERSION)
	ln -sf libbib.so.$(VERSION) $@

# The embedding example: a host program linked against libbib.
$(BUILD)/embed: examples/embed.c $(BUILD)/libbib.a
	$(CC) $(CSTD) $(OPT) $(WARN) -Iinclude -o $@ $< $(BUILD)/libbib.a $(LDLIBS)

$(BUILD)/bib: $(CLI_OBJ) $(BUILD)/libbib.a
	$(CC) -o $@ $(CLI_OBJ) $(BUILD)/libbib.a $(LDLIBS) -ledit

# ---- spec -------------------------------------------------------------------
$(BUILD)/isa-gen: tools/isa-gen.c $(BUILD)/libbib.a
	$(CC) $(CFLAGS) -o $@ $< $(BUILD)/libbib.a $(LDLIBS)
# Every build checks the executors' kernel tables against isa/kernels.def.
$(BUILD)/.kernels-checked: $(BUILD)/isa-gen
	$(BUILD)/isa-gen --check
	@touch $@
spec: $(BUILD)/isa-gen
	$(BUILD)/isa-gen > spec/isa.md
spec-check: $(BUILD)/isa-gen
	@$(BUILD)/isa-gen > $(BUILD)/isa.md
	@if cmp -s $(BUILD)/isa.md spec/isa.md; then echo "spec-check: spec/isa.md matches isa/opcodes.def"; \
	 else echo "spec-check: spec/isa.md is stale; run 'make spec'"; diff -u spec/isa.md $(BUILD)/isa.md | head -20; exit 1; fi

# ---- tests ------------------------------------------------------------------
$(BUILD)/tests/%: tests/unit/%.c $(BUILD)/libbib.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< $(BUILD)/libbib.a -lcriterion $(LDLIBS)

unit: $(UNIT_BIN)
	@set -e; for t in $(UNIT_BIN); do echo "== $$t"; $$t --jobs 2; done

hex: all
	$(BUILD)/bib test --coverage tests/hex

# The numpy oracle's driver: runs one kernel on .npy inputs (tests/oracle/check.py).
$(BUILD)/oracle_driver: tests/oracle/oracle_driver.c $(BUILD)/libbib.a
	$(CC) $(CFLAGS) -o $@ $< $(BUILD)/libbib.a $(LDLIBS)

TEST_BINS = all $(UNIT_BIN) $(BUILD)/embed $(BUILD)/oracle_driver
test-bins: $(TEST_BINS)
test: $(TEST_BINS)
	@BUILD=$(BUILD) PYTHON=$(PYTHON) sh tools/run-tests.sh

# The unit tests, hex suites, CLI tests and oracle again on the sanitized
# build in $(BUILD)/san; one suite of `make test`. ASan's leak check is on for
# the CPU-only suites; with Vulkan in the process it reports the driver's
# own allocations (lavapipe's, in unloaded modules), so it is off there.
SAN_BUILD = $(BUILD)/san
sanitize:
	@$(MAKE) -s --no-print-directory SANITIZE=1 BUILD=$(SAN_BUILD) test-bins
	@BUILD=$(SAN_BUILD) BIB=$(SAN_BUILD)/bib PYTHON=$(PYTHON) BIB_TEST_SANITIZED=1 sh tools/run-tests.sh

# Benchmark programs beside their peers (oneDNN and OpenBLAS for MATMUL).
$(BUILD)/gemm_bench: bench/gemm_bench.c $(BUILD)/libbib.a | $(BUILD)/.bench-deps
	$(CC) $(CFLAGS) -o $@ $< $(BUILD)/libbib.a -ldnnl -lgomp -lopenblas $(LDLIBS)

# A GPU executor's speed through its ops table (make cuda-bench, gpu-check).
$(BUILD)/gpu_bench: bench/gpu_bench.c $(BUILD)/libbib.a
	$(CC) $(CFLAGS) -o $@ $< $(BUILD)/libbib.a $(LDLIBS)

$(BUILD)/ops_bench: bench/ops_bench.c $(BUILD)/libbib.a
	$(CC) $(CFLAGS) -o $@ $< $(BUILD)/libbib.a $(LDLIBS)

# The instruction sequences a program executes most, exactly (bench/opseq.c).
$(BUILD)/opseq: bench/opseq.c $(BUILD)/libbib.a
	$(CC) $(CFLAGS) -o $@ $< $(BUILD)/libbib.a $(LDLIBS)

# ATTENTION and the FFN block beside MATMUL at the same inner sizes (bench/fused_bench.c).
$(BUILD)/fused_bench: bench/fused_bench.c $(BUILD)/libbib.a
	$(CC) $(CFLAGS) -o $@ $< $(BUILD)/libbib.a $(LDLIBS)

# BIB's ALLREDUCE beside MPI_Allreduce (bench/allreduce.bench.sh); mpicc links libmpi,
# Open MPI's (mpicc) or MPICH's (mpicc.mpich, libmpich-dev: a bench dependency).
$(BUILD)/allreduce_peer: bench/allreduce_peer.c $(BUILD)/libbib.a
	mpicc $(CFLAGS) -o $@ $< $(BUILD)/libbib.a $(LDLIBS)
$(BUILD)/allreduce_peer_mpich: bench/allreduce_peer.c $(BUILD)/libbib.a | $(BUILD)/.bench-deps
	mpicc.mpich $(CFLAGS) -o $@ $< $(BUILD)/libbib.a $(LDLIBS)

bench: all $(BUILD)/gemm_bench $(BUILD)/ops_bench $(BUILD)/fused_bench
	@BUILD=$(BUILD) sh bench/run.sh

include tools/install.mk

demo: all
	@sh tools/demo.sh

# A real model end to end: train on scikit-learn's digits with torch, import
# the ONNX export with tools/bib-onnx, run all 1,797 images with bib run.
digits: all
	@BIB=$(BUILD)/bib PYTHON=$(PYTHON) sh examples/digits/run.sh $(BUILD)/digits

# A decoder with a key/value cache end to end: train a character-level GPT
# with torch, import its ONNX export, generate text one token at a time.
generate: all
	@BIB=$(BUILD)/bib PYTHON=$(PYTHON) sh examples/generate/run.sh $(BUILD)/generate

# The README's two commands in a fresh Debian 12 root (tools/fresh-check.sh);
# needs root and a Debian mirror.
fresh-check:
	@BUILD=$(BUILD) sh tools/fresh-check.sh

FORMAT_SRC = $(LIB_SRC) $(CLI_SRC) $(UNIT_SRC) $(wildcard */*.h */*/*.h */*/*/*.h) tools/isa-gen.c \
             include/bib.hpp $(wildcard tests/cpp/*.cpp) \
             $(wildcard bench/*.c examples/*.c tests/oracle/*.c tests/fuzz/*.c backends/*/testing/*.c)
format:
	clang-format -i $(FORMAT_SRC)
format-check:
	@clang-format --dry-run --Werror $(FORMAT_SRC) && echo "format-check: clean"

clean:
	rm -rf $(BUILD)

# Objects follow the compiler and its flags as they follow their sources: a
# pulled Makefile that changes a flag (visibility, a define), or another CC,
# rebuilds them instead of linking objects made under the old flags.
BUILD_FLAGS := $(CC) $(CFLAGS) $(LIB_VISIBILITY)
ifneq ($(BUILD_FLAGS),$(file <$(BUILD)/.flags))
$(shell mkdir -p $(BUILD))
$(file >$(BUILD)/.flags,$(BUILD_FLAGS))
endif

-include $(shell find $(BUILD)/obj $(BUILD)/tests -name '*.d' 2>/dev/null)
