#!/bin/sh
# The path around the kernels: bib run of a program that copies one
# f32[N,N] .npy input to its output, and of one that only takes the input,
# against numpy's np.load + np.save of the same file (and np.save + os.fsync,
# since bib's outputs are fsynced before they are renamed into place).
# Usage: BIB=build/bib sh bench/io.bench.sh [N] [repeats]   (N=4096: 64 MB)
set -eu
BIB=${BIB:-build/bib}
N=${1:-4096}
R=${2:-5}
PY=/usr/bin/python3
T=$(mktemp -d "${TMPDIR:-/tmp}/bib-io.XXXXXX")
trap 'rm -rf "$T"' EXIT INT TERM
printf '.input a t0 f32[?,?]\n.output b t1\n.func main regs=1\n    COPY t1, t0\n    HALT r0\n.end\n' >"$T/copy.basm"
printf '.input a t0 f32[?,?]\n.func main regs=1\n    HALT r0\n.end\n' >"$T/none.basm"
timeout 120 $PY -c "import numpy as np; np.save('$T/a.npy', np.random.default_rng(1).standard_normal(($N,$N), dtype=np.float32))"
best() { # best wall seconds of R runs of the command
    b=
    for _ in $(seq "$R"); do
        s=$(date +%s.%N)
        timeout 120 "$@" >/dev/null
        e=$(date +%s.%N)
        b=$(echo "$s $e ${b:-1e9}" | awk '{d=$2-$1; print (d<$3)?d:$3}')
    done
    echo "$b"
}
np=$(best $PY -c "import numpy as np; np.save('$T/n.npy', np.load('$T/a.npy'))")
npf=$(best $PY -c "
import numpy as np, os
np.save('$T/n.npy', np.load('$T/a.npy'))
fd = os.open('$T/n.npy', os.O_RDONLY); os.fsync(fd); os.close(fd)")
pystart=$(best $PY -c "import numpy")
copy=$(best "$BIB" run "$T/copy.basm" --input "a=$T/a.npy" --output "b=$T/b.npy")
cmp "$T/a.npy" "$T/b.npy" || { echo "the copy differs from its input" >&2; exit 1; }
none=$(best "$BIB" run "$T/none.basm" --input "a=$T/a.npy")
catt=$(best sh -c "cat '$T/a.npy' >'$T/c.npy'")
syncw=$(best $PY -c "
import os
d = open('$T/a.npy','rb').read()
fd = os.open('$T/s.npy', os.O_WRONLY|os.O_CREAT|os.O_TRUNC, 0o644); os.write(fd, d); os.close(fd)
fd = os.open('$T/s.npy', os.O_RDONLY); os.fsync(fd); os.close(fd)")
echo "f32[$N,$N] ($(stat -c %s "$T/a.npy") bytes), best of $R, seconds:"
echo "  numpy load+save        $np"
echo "  numpy load+save+fsync  $npf"
echo "  python -c 'import numpy' alone $pystart"
echo "  bib run copy           $copy"
echo "  bib run, input only    $none"
echo "  cat                    $catt"
awk -v c="$copy" -v n="$np" -v f="$npf" 'BEGIN {
    printf "  bib copy / numpy load+save       %.2fx\n", c/n
    printf "  bib copy / numpy load+save+fsync %.2fx\n", c/f }'
