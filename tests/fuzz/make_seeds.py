#!/usr/bin/python3
"""tests/fuzz/make_seeds.py: builds the seed corpora and dictionaries of the
fuzz harnesses (tests/fuzz/fuzz_*.c) from the hex test cases and examples.

    make_seeds.py BIB OUTDIR

BIB is the CLI (build/bib). Writes:
  OUTDIR/seeds/bib/    one .bib module per hex case and example: the
                       `-- asm` section assembled by `BIB asm`, or for a
                       raw-only case the `-- raw` words in a module of one
                       function `main` (regs from `-- options`, memory from
                       `-- mem`), written here in the container format
                       (spec/bib-format.md); for fuzz_load and fuzz_run
  OUTDIR/seeds/basm/   every `-- asm` section and examples/*.basm; for fuzz_asm
  OUTDIR/bib.dict      opcode words (from isa/opcodes.def), the magic and
                       section types, as libFuzzer dictionary entries
  OUTDIR/basm.dict     mnemonics, directives and operand spellings
  OUTDIR/seeds/hexcase/ every hex case file; for fuzz_hexcase
  OUTDIR/seeds/npy/    .npy files of versions 1-3, dtypes <f4 <i4 <f8, empty,
                       scalar and small shapes; for fuzz_npy
  OUTDIR/npy.dict, OUTDIR/hexcase.dict  copies of tests/fuzz/*.dict
Case outcomes are ignored: a case that expects an assembly error still makes
a good text seed, and one that expects a trap a good module seed.
"""
import glob
import os
import re
import struct
import subprocess
import sys
import tempfile
import zlib

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def sections(text):
    """A hex case's sections: name -> body text."""
    out, name, body = {}, None, []
    for line in text.splitlines(keepends=True):
        if line.startswith("-- "):
            if name is not None:
                out[name] = "".join(body)
            name, body = line[3:].strip(), []
        elif name is not None:
            body.append(line)
    if name is not None:
        out[name] = "".join(body)
    return out


def hex_values(body):
    vals = []
    for line in body.splitlines():
        line = re.split(r"[;#]", line, 1)[0]
        vals += [int(tok, 16) for tok in line.split()]
    return vals


def name_bytes(s):
    b = s.encode()
    return struct.pack("<H", len(b)) + b


def container(sections_in):
    """A .bib file from (type, flags, payload) tuples, as module/format.c writes it."""
    n = len(sections_in)
    pos = 32 + 16 * n
    table, body = b"", b""
    start = pos
    for typ, flags, payload in sections_in:
        pad = (-pos) % 8
        body += b"\0" * pad
        pos += pad
        table += struct.pack("<IIII", typ, flags, pos, len(payload))
        body += payload
        pos += len(payload)
    assert start == 32 + len(table)
    header = bytearray(b"\x7fBIB" + struct.pack("<HHIIIIII", 1, 0, 0, n, 32, pos, 0, 0))
    f = bytearray(header + table + body)
    struct.pack_into("<I", f, 24, zlib.crc32(bytes(f)) & 0xFFFFFFFF)
    return bytes(f)


def raw_module(sec):
    words = hex_values(sec["raw"])
    if not words or len(words) % 5:
        return None
    count = len(words) // 5
    regs = 16
    m = re.search(r"regs=(\d+)", sec.get("options", ""))
    if m:
        regs = int(m.group(1))
    code = struct.pack("<%dI" % len(words), *[w & 0xFFFFFFFF for w in words])
    symbols = struct.pack("<IIII", 1, 0, 0, 0) + struct.pack("<IIII", 0, count, 0, regs)
    symbols += name_bytes("main")
    parts = [(1, 1, code)]
    if "mem" in sec:
        mem = bytes(hex_values(sec["mem"]))
        parts.append((3, 1, struct.pack("<Q", len(mem)) + mem))
    parts.append((4, 1, symbols))
    return container(parts)


def assemble(bib, text, out_path):
    with tempfile.NamedTemporaryFile("w", suffix=".basm", delete=False) as f:
        f.write(text)
        src = f.name
    try:
        r = subprocess.run([bib, "asm", src, "-o", out_path], cwd=ROOT,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return r.returncode == 0
    finally:
        os.unlink(src)


def opcode_rows():
    rows = []
    for line in open(os.path.join(ROOT, "isa/opcodes.def")):
        m = re.match(r"\s*(?:[TGVCK]|GK)?OP\((\w+),\s*(0x[0-9A-Fa-f]+)", line)
        if m:
            rows.append((m.group(1), int(m.group(2), 16)))
    return rows


def esc(b):
    return "".join("\\x%02X" % c for c in b)


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: make_seeds.py BIB OUTDIR")
    bib, out = os.path.abspath(sys.argv[1]), sys.argv[2]
    bib_dir, basm_dir = os.path.join(out, "seeds/bib"), os.path.join(out, "seeds/basm")
    os.makedirs(bib_dir, exist_ok=True)
    os.makedirs(basm_dir, exist_ok=True)
    texts = []
    for path in sorted(glob.glob(os.path.join(ROOT, "tests/hex/**/*.hex*"), recursive=True)):
        sec = sections(open(path, encoding="utf-8", errors="replace").read())
        stem = os.path.relpath(path, os.path.join(ROOT, "tests/hex")).replace("/", "_")
        if "asm" in sec:
            texts.append((stem, sec["asm"]))
            assemble(bib, sec["asm"], os.path.join(bib_dir, stem + ".bib"))
        elif "raw" in sec:
            mod = raw_module(sec)
            if mod is not None:
                open(os.path.join(bib_dir, stem + ".bib"), "wb").write(mod)
    for path in sorted(glob.glob(os.path.join(ROOT, "examples/*.basm"))):
        stem = "example_" + os.path.basename(path)
        text = open(path, encoding="utf-8", errors="replace").read()
        texts.append((stem, text))
        # Examples name their .ptx/.cu files relative to the tree.
        subprocess.run([bib, "asm", path, "-o", os.path.join(bib_dir, stem + ".bib")], cwd=ROOT,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for stem, text in texts:
        open(os.path.join(basm_dir, stem), "w").write(text)

    rows = opcode_rows()
    with open(os.path.join(out, "bib.dict"), "w") as d:
        d.write('magic="%s"\n' % esc(b"\x7fBIB"))
        for typ in (1, 2, 3, 4, 5, 16, 17, 18):
            d.write('section_%d="%s"\n' % (typ, esc(struct.pack("<I", typ))))
        d.write('spirv_magic="%s"\n' % esc(struct.pack("<I", 0x07230203)))
        for name, code in rows:
            d.write('op_%s="%s"\n' % (name, esc(struct.pack("<I", code))))
    directives = set()
    for path in [os.path.join(ROOT, "spec/assembly.md")]:
        directives |= set(re.findall(r"(?<![\w.])\.[a-z][a-z_]*", open(path).read()))
    with open(os.path.join(out, "basm.dict"), "w") as d:
        words = sorted(directives) + [n for n, _ in rows]
        words += ["r0", "r15", "t0", "t3", "k0", "f32", "i32", "args=", "regs=", "->", ":",
                  ",", "0x", "-1", "?", "\"", "\\n", ";", "main", "print_i64", "print_str"]
        for i, w in enumerate(words):
            d.write('w%d="%s"\n' % (i, w.replace("\\", "\\\\").replace('"', '\\"')))
    # fuzz_hexcase: the case files themselves; fuzz_npy: .npy files of every
    # version, both dtypes, empty and scalar shapes, written byte by byte as
    # numpy writes them (no numpy needed).
    case_dir = os.path.join(out, "seeds", "hexcase")
    npy_dir = os.path.join(out, "seeds", "npy")
    os.makedirs(case_dir, exist_ok=True)
    os.makedirs(npy_dir, exist_ok=True)
    for path in sorted(glob.glob(os.path.join(ROOT, "tests/hex/**/*.hex"), recursive=True)):
        rel = os.path.relpath(path, os.path.join(ROOT, "tests/hex")).replace("/", "_")
        open(os.path.join(case_dir, rel), "wb").write(open(path, "rb").read())
    for version in (1, 2, 3):
        for descr in ("<f4", "<i4", "<f8"):
            for shape in ((), (0,), (3,), (2, 3), (3, 0), (1, 2, 1, 2)):
                dims = "%d," % shape[0] if len(shape) == 1 else ", ".join(map(str, shape))
                header = "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }" % (descr, dims)
                head_len = 10 if version == 1 else 12
                pad = 64 - (head_len + len(header) + 1) % 64
                header = header + " " * pad + "\n"
                size = struct.pack("<H" if version == 1 else "<I", len(header))
                count = 1
                for d in shape:
                    count *= d
                body = bytes(range(256)) * (count * 8 // 256 + 1)
                item = 8 if descr == "<f8" else 4
                blob = b"\x93NUMPY" + bytes([version, 0]) + size + header.encode() + body[:count * item]
                name = "v%d_%s_%s.npy" % (version, descr[1:], "x".join(map(str, shape)) or "scalar")
                open(os.path.join(npy_dir, name), "wb").write(blob)
    for name in ("npy.dict", "hexcase.dict"):
        src = os.path.join(ROOT, "tests/fuzz", name)
        open(os.path.join(out, name), "wb").write(open(src, "rb").read())
    print("make_seeds: %d module seeds, %d text seeds, %d case seeds, %d npy seeds, %d opcodes in "
          "the dictionary" % (len(os.listdir(bib_dir)), len(os.listdir(basm_dir)),
                              len(os.listdir(case_dir)), len(os.listdir(npy_dir)), len(rows)))


if __name__ == "__main__":
    main()
