#!/bin/sh
# CLI tests for `bib info`: the text names the CPU, its features and kernel
# level, every executor's devices or why there are none, and what
# --backend=auto picks for small and large work with its threshold, and the
# MPI library each launcher's run would load; --json is one valid JSON object
# with the same facts.
# Prints one line per check and "N passed, N failed" at the end.
. "$(dirname "$0")/lib/common.sh"
export XDG_CACHE_HOME="$T/cache"
# Not under a launcher, whatever started the tests.
unset BIB_MPI_LIBRARY OMPI_COMM_WORLD_SIZE PMI_SIZE

# check NAME PATTERN: the text report matches the (grep basic) pattern
check() {
    if grep -q -- "$2" "$T/info"; then ok "$1"; else bad "$1: no line matches '$2'"; fi
}

if $BIB info >"$T/info" 2>"$T/err"; then ok "bib info exits 0"; else bad "bib info: $(cat "$T/err")"; fi
check "names the CPU model" "^  model:    ."
check "counts the cores" "^  cores:    [0-9]\+ online, [0-9]\+ usable"
check "gives the memory" "^  memory:   [0-9.]\+ GiB total"
check "lists SIMD features from CPUID" "^  features: sse2"
check "names the kernel level chosen" "^  kernels:  \(scalar\|avx2\|avx512\)"
check "describes the cpu executor" "^  executor: cpu: "
check "has a CUDA section" "^CUDA$"
check "has a Vulkan section" "^Vulkan$"
check "each GPU section lists devices or says why none" "^  \(device [0-9]\+: \|absent: .\)"
check "says what auto picks for small work" "^  small work (MATMUL 16^3, operands on the host): \(cpu\|cuda\|vulkan\)$"
check "says what auto picks for large work" "^  large work (MATMUL 4096^3, operands on the host): \(cpu\|cuda\|vulkan\)$"
check "gives auto's threshold" "^  threshold: "
check "gives the cpu's measured model" "^  cpu:      [0-9.]\+ us per call, [0-9.]\+ GFLOP/s"
if grep -q "^CUDA$" "$T/info"; then
    sed -n '/^CUDA$/,/^$/p' "$T/info" >"$T/cuda"
    if grep -q "absent: .*\(driver\|device\|CUDA\)" "$T/cuda" || grep -q "device 0: cuda: .*driver [0-9]" "$T/cuda"; then
        ok "CUDA: the driver version and devices, or why absent: $(sed -n 2p "$T/cuda")"
    else
        bad "CUDA section: $(cat "$T/cuda")"
    fi
fi
if grep -q "llvmpipe" "$T/info"; then
    check "lavapipe is never a candidate for speed" "vulkan .*not a candidate: its device is the CPU"
    check "the Vulkan device line carries the numerics probe results" "device 0: vulkan: .*fma: .*denormals: .*rounding: "
fi

if $BIB info --json >"$T/json" 2>"$T/err"; then ok "bib info --json exits 0"; else bad "bib info --json: $(cat "$T/err")"; fi
cp "$T/json" "$T/json0"
if "$PY" -c 'import json,sys; json.load(sys.stdin)' <"$T/json" 2>"$T/err"; then
    ok "--json is valid JSON"
else
    bad "--json does not parse: $(cat "$T/err")"
fi
if $PY -c "
import json, sys
r = json.load(open('$T/json'))
c = r['cpu']
assert c['model'] and c['cores_online'] >= 1 and c['memory_total_bytes'] > 0, c
assert c['kernel_level'] in ('scalar', 'avx2', 'avx512'), c['kernel_level']
assert 'sse2' in c['features'] or c['kernel_level'] == 'scalar'
names = [g['name'] for g in r['gpu_executors']]
for g in r['gpu_executors']:
    assert g['devices'] or g['absent'], g
a = r['auto']
assert a['small']['executor'] in ['cpu'] + names and a['large']['executor'] in ['cpu'] + names, a
assert a['models'][0]['executor'] == 'cpu' and a['models'][0]['flops_per_s'] > 0
for m in a['models']:
    if 'llvmpipe' in json.dumps(r) and m['executor'] == 'vulkan':
        assert m['candidate'] is False
assert a['threshold'] is None or a['threshold']['flops_from_host'] >= 0
" 2>"$T/err"; then ok "--json carries the cpu, devices and auto's choice"; else bad "--json content: $(cat "$T/err")"; fi

# auto's models: every executor of the build, and why one is not a
# candidate, as the text says; the launcher fact of the text's MPI section.
# check_models NAME JSON TEXT: the JSON's models say what the text's lines do
check_models() {
    if "$PY" -c "
import json, re, sys
r = json.load(open('$2'))
text = open('$3').read().split('--backend=auto')[1].split('small work')[0]
built = ['cpu'] + [g['name'] for g in r['gpu_executors']]
models = r['auto']['models']
assert [m['executor'] for m in models] == built, (models, built)
for m in models:
    line = [l for l in text.splitlines() if l.strip().startswith(m['executor'])][0]
    if m['candidate']:
        assert 'reason' not in m and 'not a candidate' not in line, (m, line)
    else:
        assert m['reason'] and line.endswith(m['reason']), (m, line)
assert r['launched_by'] is None and 'not started by a launcher' in open('$3').read(), r['launched_by']
" 2>"$T/err"; then ok "$1"; else bad "$1: $(cat "$T/err")"; fi
}
check_models "--json's auto models: every executor, with the text's reason when not a candidate" "$T/json0" "$T/info"
$BIB info --device nosuch >"$T/info.ns" 2>/dev/null
$BIB info --json --device nosuch >"$T/json.ns" 2>/dev/null
check_models "--json --device nosuch keeps every executor in auto's models, with why" "$T/json.ns" "$T/info.ns"
if OMPI_COMM_WORLD_SIZE=2 $BIB info --json 2>/dev/null |
    "$PY" -c "import json, sys; assert json.load(sys.stdin)['launched_by'] == 'mpirun (Open MPI)'" 2>"$T/err"; then
    ok "--json names the launcher that started this process (launched_by)"
else
    bad "launched_by under OMPI_COMM_WORLD_SIZE: $(cat "$T/err")"
fi

# The numerics and limits are fields, not only the describe string.
if $PY -c "
import json, sys
r = json.load(open('$T/json'))
devices = [r['cpu']] + [d for g in r['gpu_executors'] for d in g['devices']]
for d in devices:
    for k in ('name', 'kind', 'fma', 'denormals', 'rounding'):
        assert isinstance(d[k], str) and d[k], (k, d)
    assert isinstance(d['fp64'], bool), d
    assert d['memory_bytes'] is None or d['memory_bytes'] > 0, d
    assert set(d['limits']) == {'max_buffer_bytes', 'max_workgroup', 'shared_memory_bytes', 'compute_units', 'max_threads', 'loop_iterations'}, d
    for v in d['limits'].values():
        assert v is None or (isinstance(v, int) and v > 0), d
assert r['cpu']['kind'] == 'CPU' and r['cpu']['limits']['max_threads'] == 256, r['cpu']
for g in r['gpu_executors']:
    for d in g['devices']:
        if g['name'] == 'vulkan':
            # the same facts as the describe string, one by one
            assert 'fma: ' + d['fma'] in d['describe'] and 'denormals: ' + d['denormals'] in d['describe'], d
            assert d['limits']['max_buffer_bytes'] > 0 and d['limits']['max_workgroup'] > 0, d
            # the probed loop limit, as the describe string gives it
            n = d['limits']['loop_iterations']
            assert ('loops: %d iterations an invocation' % n if n else 'loops: no limit found') in d['describe'], d
" 2>"$T/err"; then ok "--json gives fma, denormals, rounding, memory and limits as fields of every device"; else bad "--json device fields: $(cat "$T/err")"; fi

# A CUDA device's fields, on the mock driver (tests/unit builds it).
MOCK=${BUILD:-build}/tests/libcuda_mock.so
if [ -f "$MOCK" ]; then
    if BIB_CUDA_LIBRARY="$MOCK" $BIB info --json 2>/dev/null | $PY -c "
import json, sys
r = json.load(sys.stdin)
cuda = [g for g in r['gpu_executors'] if g['name'] == 'cuda'][0]
d = cuda['devices'][0]
assert d['name'] == 'BIB mock CUDA device' and d['kind'].startswith('GPU'), d
assert 'fused' in d['fma'] and 'preserved' in d['denormals'] and 'nearest-even' in d['rounding'], d
assert d['fp64'] is True and d['memory_bytes'] == 1 << 30 and d['limits']['compute_units'] == 4, d
" 2>"$T/err"; then ok "a CUDA device's numerics and limits are fields too (mock driver)"; else bad "cuda fields: $(cat "$T/err")"; fi
else
    echo "SKIP CUDA device fields: no $MOCK (built with build/tests/test_cuda when nvcc exists)"
fi

# A device selector from the environment that matches nothing: the message
# names the variable (it used to read as if --device had been given) and
# lists the devices there are.
printf '.input a t0 f32[?]\n.output b t1\n.func main regs=1\n    COPY t1, t0\n    HALT r0\n.end\n' >"$T/copy.basm"
$PY -c "import numpy as np; np.save('$T/a.npy', np.zeros(3, '<f4'))" || bad "numpy"
# env_selector NAME VAR BACKEND [ENV...]: VAR=nosuch makes --backend=BACKEND exit 69 naming VAR and the devices
env_selector() {
    name=$1 var=$2 backend=$3
    shift 3
    env "$@" "$var=nosuch" $BIB run "$T/copy.basm" --input "a=$T/a.npy" --backend="$backend" \
        >/dev/null 2>"$T/err"
    rc=$?
    if [ $rc -eq 69 ] && grep -q "matches 'nosuch' (from $var); [0-9]* devices\{0,1\}: 0 '..*'" "$T/err"; then
        ok "$name"
    else bad "$name: exit $rc, $(cat "$T/err")"; fi
}
if grep -q "^  device 0: vulkan" "$T/info"; then
    env_selector "BIB_VK_DEVICE=nosuch is named in the message, with the Vulkan devices" BIB_VK_DEVICE vulkan
else
    echo "SKIP BIB_VK_DEVICE=nosuch: no Vulkan device"
fi
if [ -f "$MOCK" ]; then
    env_selector "BIB_CUDA_DEVICE=nosuch is named in the message, with the CUDA devices (mock driver)" \
        BIB_CUDA_DEVICE cuda BIB_CUDA_LIBRARY="$MOCK"
else
    echo "SKIP BIB_CUDA_DEVICE=nosuch: no $MOCK"
fi

# Regression: with a cpu executor that cannot start, auto's models began
# with a comma ("models":[,{...), which is not JSON.
if BIB_CPU_LEVEL=bogus $BIB info --json >"$T/json" 2>"$T/err" &&
    "$PY" -c "
import json, sys
r = json.load(open('$T/json'))
assert r['cpu']['executor'].startswith('the cpu executor failed to start: BIB_CPU_LEVEL=bogus'), r['cpu']
cpu = [m for m in r['auto']['models'] if m['executor'] == 'cpu']
assert len(cpu) == 1 and cpu[0]['candidate'] is False and cpu[0]['flops_per_s'] is None, r['auto']
assert cpu[0]['reason'].startswith('the cpu executor failed to start: BIB_CPU_LEVEL=bogus'), cpu
" 2>>"$T/err"; then
    ok "--json stays JSON when the cpu executor cannot start, and says why it is no candidate"
else
    bad "--json with BIB_CPU_LEVEL=bogus: $(cat "$T/err") $(head -c 300 "$T/json")"
fi

# ---- MPI: what a run under each launcher loads, found without starting MPI ----
check "has an MPI section" "^MPI (what a run under a launcher loads)$"
check "lists Open MPI's library or why it is unusable" '^  mpirun (Open MPI): libmpi.so.40: \(Open MPI ABI, "Open MPI v[0-9]\|unusable: \)'
check "lists the MPICH ABI's library or why it is unusable" '^  mpiexec (Hydra): libmpi\(ch\)\?.so.12: \(MPICH ABI, "\|unusable: \)'
check "outside a launcher, a world of one" "^  this process: not started by a launcher (a world of one)$"
# Installed (make deps installs openmpi-bin and mpich), each gives its version.
if command -v mpirun.openmpi >/dev/null 2>&1; then
    check "Open MPI installed: its version" '^  mpirun (Open MPI): libmpi.so.40: Open MPI ABI, "Open MPI v[0-9]'
fi
if command -v mpiexec.mpich >/dev/null 2>&1; then
    check "MPICH installed: its version" '^  mpiexec (Hydra): libmpich.so.12: MPICH ABI, "MPICH Version: [0-9]'
fi
if OMPI_COMM_WORLD_SIZE=2 $BIB info 2>/dev/null | grep -q '^  mpirun (Open MPI): .*\[selected\]$' &&
    PMI_SIZE=2 $BIB info 2>/dev/null | grep -q '^  mpiexec (Hydra): .*\[selected\]$'; then
    ok "the launcher's environment selects its library (OMPI_COMM_WORLD_SIZE, PMI_SIZE)"
else
    bad "selected library: $(OMPI_COMM_WORLD_SIZE=2 $BIB info 2>&1 | tail -3)"
fi
if BIB_MPI_LIBRARY=libz.so.1 $BIB info --json 2>"$T/err" | "$PY" -c "
import json, sys
m = json.load(sys.stdin)['mpi']
assert len(m) == 1, m
m = m[0]
assert m['launcher'] == '\$BIB_MPI_LIBRARY' and m['library'] == 'libz.so.1', m
assert m['abi'] is None and m['version'] is None and m['selected'] is True, m
assert 'libz.so.1 has no MPI_Init: not an MPI library' in m['absent'], m
" 2>>"$T/err"; then
    ok "--json: \$BIB_MPI_LIBRARY naming no MPI library is listed alone, unusable, with why"
else
    bad "--json with BIB_MPI_LIBRARY=libz.so.1: $(cat "$T/err")"
fi
if "$PY" -c "
import json, sys
m = json.load(open('$T/json0'))['mpi']
assert [x['launcher'] for x in m] == ['mpirun (Open MPI)', 'mpiexec (Hydra)'], m
for x in m:
    assert (x['abi'] is None) == (x['absent'] is not None) == (x['version'] is None), x
    assert x['selected'] is False, x
" 2>"$T/err"; then
    ok "--json lists both ABIs' libraries, each usable (abi, version) or not (absent)"
else
    bad "--json mpi: $(cat "$T/err")"
fi

$BIB info extra >/dev/null 2>"$T/err"
if [ $? -eq 64 ]; then ok "bib info with a file is a usage error"; else bad "bib info extra: $(cat "$T/err")"; fi

finish
