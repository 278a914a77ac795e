#!/bin/sh
# examples/digits/run.sh [OUTDIR]: a real model end to end (`make digits`).
#
# Trains a 64-32-10 MLP on scikit-learn's bundled 8x8 digits with torch
# (train.py: fixed seed, a few seconds), exports it to ONNX, imports it with
# tools/bib-onnx, runs all 1,797 images in one `bib run` on the CPU and on
# Vulkan, and checks that BIB's predicted labels (the model's ArgMax output)
# equal torch's, image for image, and that both executors wrote the same
# bytes. Prints the accuracy. Files go to OUTDIR (default build/digits).
# Exits 1 when a label or a byte differs; prints SKIP and exits 0 while
# tools/bib-onnx is not in the tree.
set -eu
BIB=${BIB:-build/bib}
PY=${PYTHON:-/usr/bin/python3}
IMPORTER=${BIB_ONNX:-tools/bib-onnx}
OUT=${1:-build/digits}
if [ ! -f "$IMPORTER" ]; then
    echo "SKIP: digits: $IMPORTER is not in the tree yet"
    exit 0
fi
# The importer drives libbib through the Python package: the library of this
# build (under make sanitize, whose library needs the ASan runtime preloaded
# into python3, the package's own choice, the source tree's build/).
[ -n "${BIB_TEST_SANITIZED:-}" ] || [ -n "${BIB_LIBRARY:-}" ] ||
    BIB_LIBRARY="$(cd "$(dirname "$BIB")" && pwd)/libbib.so.0"
export BIB_LIBRARY PYTHONDONTWRITEBYTECODE=1
say() { printf '$ %s\n' "$*"; }
run() { say "$*"; timeout 300 "$@"; }

run "$PY" examples/digits/train.py "$OUT"
run "$PY" "$IMPORTER" "$OUT/digits.onnx" -o "$OUT/digits.bib"
run "$BIB" run "$OUT/digits.bib" --backend=cpu --input "x=$OUT/images.npy" \
    --output "label=$OUT/label.cpu.npy" --output "logits=$OUT/logits.cpu.npy"
vulkan=yes
say "$BIB run $OUT/digits.bib --backend=vulkan ..."
timeout 300 "$BIB" run "$OUT/digits.bib" --backend=vulkan --strict-device --input "x=$OUT/images.npy" \
    --output "label=$OUT/label.vulkan.npy" --output "logits=$OUT/logits.vulkan.npy" 2>"$OUT/vulkan.err" || {
    rc=$?
    [ $rc -eq 69 ] || { cat "$OUT/vulkan.err" >&2; exit 1; }
    echo "SKIP: digits on vulkan: $(cat "$OUT/vulkan.err")"
    vulkan=no
}
timeout 120 "$PY" - "$OUT" "$vulkan" <<'PYEOF'
import sys
import numpy as np
out, vulkan = sys.argv[1], sys.argv[2] == "yes"
truth = np.load(out + "/labels.npy")
torch_labels = np.load(out + "/torch_labels.npy")
held = np.load(out + "/held_out.npy")
bib = np.load(out + "/label.cpu.npy")
status = 0
if bib.shape != truth.shape:
    sys.exit("digits: bib's labels are %s%s, want %d of them" % (bib.dtype, bib.shape, len(truth)))
differ = np.flatnonzero(bib.astype(np.int64) != torch_labels)
if len(differ):
    print("FAIL digits: bib's label differs from torch's on %d of %d images (first: image %d, bib %d, torch %d)"
          % (len(differ), len(truth), differ[0], bib[differ[0]], torch_labels[differ[0]]))
    status = 1
else:
    print("ok   digits: bib's %d labels (%s) equal torch's" % (len(bib), bib.dtype))
if vulkan:
    for name in ("label", "logits"):
        same = open("%s/%s.cpu.npy" % (out, name), "rb").read() == open("%s/%s.vulkan.npy" % (out, name), "rb").read()
        print(("ok   digits: %s: the same bytes on cpu and vulkan" if same else
               "FAIL digits: %s: cpu and vulkan wrote different bytes") % name)
        status |= 0 if same else 1
print("accuracy: %.2f%% on all %d images (%d right), %.2f%% on the %d held out of training"
      % (100.0 * (bib == truth).mean(), len(truth), (bib == truth).sum(),
         100.0 * (bib[held] == truth[held]).mean(), len(held)))
sys.exit(status)
PYEOF
