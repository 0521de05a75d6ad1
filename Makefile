# xsa: an embeddable engine in C, scripted in Lua 5.4, for Exclusive Self
# Attention research. `make` builds; `make test`, `make bench`, `make run`.
#
# Outputs (at the root of the checkout, for the default BUILD=build):
#   libxsa.a libxsa.so   the core (pure C, no Lua)
#   xsa.so               the Lua module: LUA_CPATH=./?.so LUA_PATH='lua/?.lua' lua5.4 -l xsa
#   xsa                  the executable: REPL and script runner
# Objects live under $(BUILD); a different BUILD keeps separate trees apart
# (the sanitizer build uses build-asan and links nothing at the root).
# A build remembers whether it has MPI in $(BUILD)/mpi.flags, so switching
# MPI=0 on or off rebuilds what depends on it.

# C compiler and the standard we hold to
CC       ?= gcc
# optimisation: -O2 plus the host's vector units (the kernels rely on AVX2/512)
OPT      ?= -O2 -march=native
# warnings, one family per line; -Werror when WERROR=1 (CI sets it)
WARN     := -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
            -Wformat=2 -Wno-format-nonliteral
# where objects go
BUILD    ?= build
# install prefix for `make install`
PREFIX   ?= /usr/local
# packages found through pkg-config (Debian names: see mk/deps.sh)
CORE_PKGS := openblas libutf8proc libcjson liblzma
PKGS     := lua5.4 $(CORE_PKGS)
# extra flags for sanitizer builds (make asan / ubsan set them)
SANITIZE ?=
WERROR   ?= 0
# Open MPI (optional: xsa.mpi, runs under mpirun): found through pkg-config
# (ompi-c) or mpicc --showme; MPI=0 builds without it even when present
MPI      ?= auto
# make fuzz: the compiler with libFuzzer (Debian: clang libfuzzer-14-dev libclang-rt-14-dev)
FUZZ_CC  ?= clang
# make fuzz: seconds each harness runs (-max_total_time)
FUZZ_SECONDS ?= 60
# make fuzz: where harnesses, scratch corpora, logs and findings go
FUZZ_BUILD ?= build-fuzz

ifeq ($(WERROR),1)
WARN += -Werror
endif

# One line per build step ("  CC core/nn.c"); V=1 prints the whole commands.
V ?= 0
ifneq ($(V),1)
say = @printf '  %-5s %s\n' $(1) $(2);
endif

PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
# the core links without Lua; the executable adds Lua; the module takes Lua
# from the interpreter that loads it
CORE_PKG_LIBS := $(shell pkg-config --libs $(CORE_PKGS) 2>/dev/null)
LUA_LIBS      := $(shell pkg-config --libs lua5.4 2>/dev/null)
EDIT_CFLAGS := $(shell pkg-config --cflags libedit 2>/dev/null)
EDIT_LIBS   := $(shell pkg-config --libs libedit 2>/dev/null)

# oneDNN (optional, Debian libdnnl-dev, no pkg-config file): found by its
# header, it gives the opt-in bf16 matrix products (core/matmul_bf16.c) and
# float32 dnnl_sgemm, the default float32 GEMM on AVX-512 CPUs (core/gemm.h);
# without it matmul_bf16.c builds stubs that refuse bf16 and every float32
# product is OpenBLAS's. DNNL=0 builds without.
DNNL     ?= $(if $(wildcard /usr/include/oneapi/dnnl/dnnl.h),1,0)
ifeq ($(DNNL),1)
DNNL_CFLAGS := -DXSA_HAVE_DNNL
DNNL_LIBS   := -ldnnl
endif

# Open MPI when present (Debian: libopenmpi-dev; mk/deps.sh --mpi); without
# it core/comm.c is the one-process case and xsa.mpi a set of no-ops.
ifneq ($(MPI),0)
MPI_LIBS   := $(shell pkg-config --libs ompi-c 2>/dev/null || mpicc --showme:link 2>/dev/null)
ifneq ($(strip $(MPI_LIBS)),)
MPI_CFLAGS := -DXSA_HAVE_MPI $(shell pkg-config --cflags ompi-c 2>/dev/null || mpicc --showme:compile 2>/dev/null)
endif
endif

# The Jupyter kernel (optional: xsa --kernel): ZeroMQ and OpenSSL's HMAC
# (Debian libzmq3-dev libssl-dev; mk/deps.sh --jupyter), found through
# pkg-config; without them kernel.c says what is missing. JUPYTER=0 builds without.
JUPYTER  ?= auto
ifneq ($(JUPYTER),0)
ifeq ($(shell pkg-config --exists libzmq libcrypto 2>/dev/null && echo ok),ok)
JUPYTER_CFLAGS := -DXSA_HAVE_JUPYTER $(shell pkg-config --cflags libzmq libcrypto)
JUPYTER_LIBS   := $(shell pkg-config --libs libzmq libcrypto)
endif
endif

CFLAGS   := -std=c11 -D_GNU_SOURCE $(OPT) -g -fPIC $(WARN) $(SANITIZE) $(PKG_CFLAGS) $(EDIT_CFLAGS) $(DNNL_CFLAGS) $(MPI_CFLAGS) $(EXTRA_CFLAGS)
LDFLAGS  := $(SANITIZE) $(EXTRA_LDFLAGS)
LIBS     := $(CORE_PKG_LIBS) $(DNNL_LIBS) $(MPI_LIBS) -lm -lpthread -ldl

MPI_STAMP := $(BUILD)/mpi.flags
ifeq ($(filter clean deps data,$(MAKECMDGOALS)),)
$(shell mkdir -p $(BUILD) && { echo '$(MPI_CFLAGS)' | cmp -s - $(MPI_STAMP) || echo '$(MPI_CFLAGS)' > $(MPI_STAMP); })
$(shell { echo '$(JUPYTER_CFLAGS)' | cmp -s - $(BUILD)/jupyter.flags || echo '$(JUPYTER_CFLAGS)' > $(BUILD)/jupyter.flags; })
endif

CORE_SRC := $(sort $(wildcard core/*.c))
BIND_SRC := $(sort $(wildcard lua/l_*.c))
# the executable's own files: the interpreter, the REPL, Ctrl-C, the Jupyter kernel
EXE_SRC  := lua/main.c lua/repl.c lua/interrupt.c $(sort $(wildcard lua/kernel*.c))
TEST_SRC := $(sort $(wildcard tests/test_*.c))
BENCH_SRC := $(sort $(wildcard tests/bench_*.c))
FUZZ_SRC := $(sort $(wildcard tests/fuzz/fuzz_*.c))

CORE_OBJ := $(CORE_SRC:%.c=$(BUILD)/%.o)
BIND_OBJ := $(BIND_SRC:%.c=$(BUILD)/%.o)
EXE_OBJ  := $(EXE_SRC:%.c=$(BUILD)/%.o)
TEST_BIN := $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)
BENCH_BIN := $(BENCH_SRC:tests/%.c=$(BUILD)/tests/%)
FUZZ_BIN := $(FUZZ_SRC:tests/fuzz/%.c=$(BUILD)/fuzz/%)

LIB_A    := $(BUILD)/libxsa.a
LIB_SO   := $(BUILD)/libxsa.so
LUA_SO   := $(BUILD)/xsa.so
EXE      := $(BUILD)/xsa

.PHONY: all deps test jupyter check bench run run-all results asan ubsan sanitize tsan fuzz fuzz-bins install uninstall clean data rock rock-install

# Building without the libraries would die on the first missing header; say
# instead which packages are missing and how to get them. Targets that install
# or only delete are exempt, and so are the recursive builds of `make test`
# (deps has run by then).
NO_LIB_CHECK := deps clean uninstall data
ifneq ($(filter-out $(NO_LIB_CHECK),$(or $(MAKECMDGOALS),all)),)
ifneq ($(shell pkg-config --exists $(PKGS) libedit 2>/dev/null && echo ok),ok)
ifeq ($(filter test asan sanitize ubsan bench run run-all,$(MAKECMDGOALS)),)
MISSING_PKGS := $(shell sh mk/deps.sh --list-missing)
$(error pkg-config cannot find $(shell for p in $(PKGS) libedit; do pkg-config --exists $$p 2>/dev/null || printf '%s ' $$p; done)(Debian packages missing: $(or $(MISSING_PKGS),none per dpkg so check PKG_CONFIG_PATH)). Run `make deps` (as root, or with passwordless sudo) to install them)
endif
endif
endif

all: $(LIB_A) $(LIB_SO) $(LUA_SO) $(EXE) $(TEST_BIN) $(BENCH_BIN)
ifeq ($(BUILD),build)
all: libxsa.a libxsa.so xsa.so xsa
libxsa.a libxsa.so xsa.so xsa: %: $(BUILD)/%
	@ln -sf $< $@
endif

# Installs missing system packages (apt-get when root or passwordless sudo),
# or stops with the exact apt-get line to run.
deps:
	@sh mk/deps.sh

$(BUILD)/%.o: %.c $(wildcard core/*.h lua/*.h)
	@mkdir -p $(dir $@)
	$(call say,CC,$<)$(CC) $(CFLAGS) -c $< -o $@

$(LIB_A): $(CORE_OBJ)
	@rm -f $@
	$(call say,AR,$@)ar rcs $@ $^

$(LIB_SO): $(CORE_OBJ)
	$(call say,LD,$@)$(CC) -shared $(LDFLAGS) -o $@ $^ $(LIBS)

# The Lua module carries the core inside it, so a stock lua5.4 needs only xsa.so.
$(LUA_SO): $(BIND_OBJ) $(CORE_OBJ)
	$(call say,LD,$@)$(CC) -shared $(LDFLAGS) -o $@ $^ $(LIBS)

$(EXE): $(EXE_OBJ) $(BIND_OBJ) $(CORE_OBJ)
	$(call say,LD,$@)$(CC) $(LDFLAGS) -rdynamic -o $@ $^ $(LUA_LIBS) $(LIBS) $(EDIT_LIBS) $(JUPYTER_LIBS)

# the files that call MPI or ask whether there is one
$(BUILD)/core/comm.o $(BUILD)/lua/l_mpi.o $(BUILD)/lua/main.o: $(MPI_STAMP)

# only the kernel's files see ZeroMQ's and OpenSSL's headers
JUPYTER_STAMP := $(BUILD)/jupyter.flags
$(BUILD)/lua/kernel.o $(BUILD)/lua/kernel_msg.o: CFLAGS += $(JUPYTER_CFLAGS)
$(BUILD)/lua/kernel.o $(BUILD)/lua/kernel_msg.o: $(JUPYTER_STAMP)

# the kernel's message parser on its own (fault injection into OpenSSL and cJSON)
$(BUILD)/tests/test_kernel_msg: tests/test_kernel_msg.c lua/kernel_msg.c lua/kernel.h tests/check.h $(JUPYTER_STAMP)
	@mkdir -p $(dir $@)
	$(call say,CC,$@)$(CC) $(CFLAGS) $(JUPYTER_CFLAGS) -o $@ $< lua/kernel_msg.c $(LDFLAGS) $(JUPYTER_LIBS) $(CORE_PKG_LIBS) -lpthread

# Installs the Jupyter kernelspec "xsa" in the user's Jupyter data folder.
jupyter: all
	./$(EXE) --install-kernel

$(BUILD)/tests/%: tests/%.c $(LIB_A) $(wildcard tests/*.h)
	@mkdir -p $(dir $@)
	$(call say,CC,$@)$(CC) $(CFLAGS) -o $@ $< $(LIB_A) $(LDFLAGS) $(LIBS)

# The SIMD kernels (written over core/simd.h: nn.c, lmhead.c, vec.h, optim.c;
# and lmhead_packed.c's own) have an AVX-512, an AVX2 and a plain C path, and a
# native build runs one of them. So `make
# test` also builds the kernel tests for the narrower paths this CPU can run
# (build-isa-avx2 on an AVX-512 host; build-isa-c, x86-64 baseline, always)
# and runs them there.
ISA_TESTS    := test_simd test_rng_normal test_nn test_attention test_attention_variant test_lmhead test_gpt test_generate test_autograd test_autograd_gpt
HOST_AVX512  := $(shell grep -qw avx512f /proc/cpuinfo 2>/dev/null && echo y)
ISA_BUILDS   := $(if $(HOST_AVX512),build-isa-avx2) build-isa-c
ISA_OPT_build-isa-avx2 := -O2 -march=native -mno-avx512f
ISA_OPT_build-isa-c    := -O2

# Every C test binary and every Lua test; ends with "N passed, M failed".
# T=tensor (or T="tensor stats", T=test_tensor.lua) runs only those: the C
# test and the Lua test of each name, without the narrower SIMD builds.
T ?=
test: deps
	@$(MAKE) --no-print-directory all
	@$(if $(strip $(T)),,$(foreach b,$(ISA_BUILDS),$(MAKE) --no-print-directory -s BUILD=$(b) MPI=0 OPT="$(ISA_OPT_$(b))" \
	    $(addprefix $(b)/tests/,$(ISA_TESTS)) &&) true)
	@XSA_EXE=$(EXE) XSA_BUILD=$(BUILD) XSA_ISA_BUILDS="$(if $(strip $(T)),,$(ISA_BUILDS))" XSA_ISA_TESTS="$(ISA_TESTS)" sh tests/run.sh $(T)

check: test

# The whole suite under AddressSanitizer + UndefinedBehaviorSanitizer (plus
# float-to-integer overflow, which gcc leaves out of "undefined"). Built without
# MPI (MPI=0): Open MPI's own allocations at exit would read as leaks.
asan sanitize: deps
	@$(MAKE) --no-print-directory BUILD=build-asan MPI=0 OPT="-O1 -fno-omit-frame-pointer" \
	    SANITIZE="-fsanitize=address,undefined,float-cast-overflow \
	    -fno-sanitize-recover=undefined,float-cast-overflow" all
	@XSA_EXE=build-asan/xsa XSA_BUILD=build-asan XSA_SANITIZED=1 \
	    ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 \
	    LSAN_OPTIONS=suppressions=$(CURDIR)/mk/lsan.supp:print_suppressions=0 \
	    UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 sh tests/run.sh

ubsan: asan

# The C tests of the engine's own threads (its kept workers, the lm_head's blocks and bf16
# slots, the row halves of linear and attention, AdamW's halves) under
# ThreadSanitizer. oneDNN, its OpenMP runtime and OpenBLAS are not
# instrumented, so their own locking reads as races: mk/tsan.supp.
TSAN_TESTS := test_nn test_attention test_simd test_gpt test_system
tsan: deps
	@$(MAKE) --no-print-directory -s BUILD=build-tsan MPI=0 OPT="-O1 -g -march=native" \
	    SANITIZE="-fsanitize=thread" $(addprefix build-tsan/tests/,$(TSAN_TESTS))
	@fail=0; for t in $(TSAN_TESTS); do \
	    TSAN_OPTIONS="suppressions=$(CURDIR)/mk/tsan.supp halt_on_error=1 exitcode=66" \
	    build-tsan/tests/$$t > build-tsan/$$t.log 2>&1 || { fail=1; tail -40 build-tsan/$$t.log; }; \
	    echo "$$t [tsan]: $$(tail -1 build-tsan/$$t.log)"; done; exit $$fail

# libFuzzer harnesses (tests/fuzz/fuzz_*.c), each run FUZZ_SECONDS on a
# scratch copy of its seed corpus; fails on any finding. The core and the
# binding are compiled with clang, -fsanitize=fuzzer-no-link,address,undefined,
# into $(FUZZ_BUILD). fuzz_bpe needs encoder.json/vocab.bpe ($$XSA_DATA or data/).
fuzz: deps
	@printf 'int LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n) { (void)d; return (int)(n & 0); }\n' \
	    > /tmp/xsa-fuzz-probe.$$$$.c && \
	    $(FUZZ_CC) -fsanitize=fuzzer,address,undefined /tmp/xsa-fuzz-probe.$$$$.c -o /tmp/xsa-fuzz-probe.$$$$ \
	    >/dev/null 2>&1; rc=$$?; rm -f /tmp/xsa-fuzz-probe.$$$$ /tmp/xsa-fuzz-probe.$$$$.c; \
	    if [ $$rc -ne 0 ]; then \
	    echo "xsa: make fuzz needs $(FUZZ_CC) with libFuzzer and the sanitizer runtimes. Run:" >&2; \
	    echo "    sudo apt-get install -y clang libfuzzer-14-dev libclang-rt-14-dev" >&2; exit 1; fi
	@$(MAKE) --no-print-directory BUILD=$(FUZZ_BUILD) MPI=0 CC=$(FUZZ_CC) OPT="-O1 -fno-omit-frame-pointer" \
	    SANITIZE="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined" fuzz-bins
	@FUZZ_BUILD=$(FUZZ_BUILD) FUZZ_SECONDS=$(FUZZ_SECONDS) sh tests/fuzz/run.sh

fuzz-bins: $(FUZZ_BIN)

# A harness links the core and the binding (fuzz_json drives xsa.json in Lua).
$(BUILD)/fuzz/%: tests/fuzz/%.c tests/fuzz/fuzz_lua.h $(BIND_OBJ) $(CORE_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -fsanitize=fuzzer -o $@ $< $(BIND_OBJ) $(CORE_OBJ) $(LDFLAGS) $(LUA_LIBS) $(LIBS)

# the kernel's message parser: lua/kernel_msg.c with ZeroMQ's and OpenSSL's flags
$(BUILD)/fuzz/fuzz_kernel_msg: tests/fuzz/fuzz_kernel_msg.c lua/kernel_msg.c lua/kernel.h $(JUPYTER_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(JUPYTER_CFLAGS) -fsanitize=fuzzer -o $@ $< lua/kernel_msg.c $(LDFLAGS) $(JUPYTER_LIBS) $(CORE_PKG_LIBS) -lpthread

# make bench ISA=avx2: the AVX2 paths on an AVX-512 CPU (tests/bench.sh),
# the engine built as the avx2 kernel tests are, in build-isa-avx2/.
bench: deps
ifeq ($(ISA),)
	@$(MAKE) --no-print-directory all
	@XSA_EXE=$(EXE) XSA_BUILD=$(BUILD) sh tests/bench.sh
else ifeq ($(ISA),avx2)
	@$(MAKE) --no-print-directory BUILD=build-isa-avx2 MPI=0 OPT="$(ISA_OPT_build-isa-avx2)" all
	@XSA_EXE=build-isa-avx2/xsa XSA_BUILD=build-isa-avx2 XSA_BENCH_ISA=avx2 sh tests/bench.sh
else
	@echo "make bench: ISA=$(ISA) is not avx2 (or unset: the CPU's widest paths)" >&2; exit 2
endif

data:
	@sh data/fetch.sh

# The main experiment: paired SA/XSA training with plots and a table (it
# builds only the executable it runs; the answer comes from a record when
# results/ has one).
run: deps
	@$(MAKE) --no-print-directory $(EXE)
	./$(EXE) scripts/part3_train.lua $(ARGS)

# The published results (README section, doc/results.md, results/report.html)
# regenerated from the records in results/, without training.
results: deps
	@$(MAKE) --no-print-directory all
	./$(EXE) scripts/results.lua $(ARGS)

run-all: deps
	@$(MAKE) --no-print-directory all
	./$(EXE) scripts/run_all.lua $(ARGS)

# `make install`: the Lua modules with the GPT-2 tokenizer files in
# LUA_LMOD/xsa/data (where xsa.data looks, as for a rock; nothing is written
# there at run time, so the tree may be read-only), xsa.so in LUA_CMOD.
LUA_LMOD := $(PREFIX)/share/lua/5.4
LUA_CMOD := $(PREFIX)/lib/lua/5.4

install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/lib $(DESTDIR)$(PREFIX)/include/xsa \
	    $(DESTDIR)$(PREFIX)/lib/pkgconfig $(DESTDIR)$(LUA_LMOD)/xsa/data $(DESTDIR)$(LUA_CMOD)
	install -m 755 $(EXE) $(DESTDIR)$(PREFIX)/bin/xsa
	install -m 644 $(LIB_A) $(DESTDIR)$(PREFIX)/lib/libxsa.a
	install -m 755 $(LIB_SO) $(DESTDIR)$(PREFIX)/lib/libxsa.so
	install -m 644 $(filter-out core/attention.h core/attention_impl.h core/tensor_impl.h core/autograd_impl.h core/gpt_impl.h core/generate_impl.h core/vec.h core/simd.h,$(wildcard core/*.h)) $(DESTDIR)$(PREFIX)/include/xsa/
	install -m 755 $(LUA_SO) $(DESTDIR)$(LUA_CMOD)/xsa.so
	install -m 644 lua/xsa/*.lua $(DESTDIR)$(LUA_LMOD)/xsa/
	install -m 644 data/encoder.json data/vocab.bpe data/tinystories.txt.xz $(DESTDIR)$(LUA_LMOD)/xsa/data/
	sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@VERSION@|$(shell sed -n 's/.*XSA_VERSION "\(.*\)".*/\1/p' core/xsa.h)|g' \
	    -e 's|@DNNL_LIBS@|$(DNNL_LIBS)|g' -e 's|@MPI_LIBS@|$(strip $(MPI_LIBS))|g' mk/xsa.pc.in > $(DESTDIR)$(PREFIX)/lib/pkgconfig/xsa.pc

# `luarocks make` (xsa-scm-1.rockspec) builds `rock` and installs `rock-install`
# into a rocks tree: LIBDIR gets xsa.so, LUADIR the Lua modules with the GPT-2
# tokenizer files (LUADIR/xsa/data, where xsa.data looks last), BINDIR xsa.
rock: $(LUA_SO) $(EXE)

rock-install: rock
	install -d $(LIBDIR) $(LUADIR)/xsa/data $(BINDIR)
	install -m 755 $(LUA_SO) $(LIBDIR)/xsa.so
	install -m 644 lua/xsa/*.lua $(LUADIR)/xsa/
	install -m 644 data/encoder.json data/vocab.bpe $(LUADIR)/xsa/data/
	install -m 755 $(EXE) $(BINDIR)/xsa

uninstall:
	rm -f $(DESTDIR)$(PREFIX)/bin/xsa $(DESTDIR)$(PREFIX)/lib/libxsa.a $(DESTDIR)$(PREFIX)/lib/libxsa.so \
	    $(DESTDIR)$(PREFIX)/lib/pkgconfig/xsa.pc $(DESTDIR)$(LUA_CMOD)/xsa.so
	rm -rf $(DESTDIR)$(PREFIX)/include/xsa $(DESTDIR)$(LUA_LMOD)/xsa

clean:
	rm -rf build build-asan build-* libxsa.a libxsa.so xsa.so xsa
