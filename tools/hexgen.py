#!/usr/bin/python3
"""tools/hexgen.py: fills in or refreshes the `-- raw` section of hex test cases.

Usage: /usr/bin/python3 tools/hexgen.py [--print] [--bib PATH] CASE.hex...

For each case with an `-- asm` section, assembles it with `bib asm` into a
temporary module, takes the code section out of the container
(spec/bib-format.md), and writes it as five hex words per instruction with a
`; MNEMONIC operands` comment (spec/hex-tests.md). The new section replaces
an existing `-- raw` section, or goes right after `-- asm`. With --print the
section is printed instead of written. A case whose assembly is expected to
fail (`-- error` with `asm:`) is left alone.

The words written become the golden encoding: check new ones by hand against
spec/isa.md before committing them.
"""

import os
import re
import struct
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OPCODES_DEF = os.path.join(ROOT, "isa", "opcodes.def")

ROW = re.compile(
    r"^\s*(OP|TOP|KOP|GOP|GKOP|VOP|COP)\(\s*(\w+)\s*,\s*(0x[0-9A-Fa-f]+)\s*,\s*(\w+)\s*,\s*(\w+)\s*,"
    r"\s*(\w+)\s*,\s*(\w+)\s*,"
)


def load_opcodes():
    """Maps each opcode word to (mnemonic, [four operand kinds]) from isa/opcodes.def."""
    table = {}
    with open(OPCODES_DEF) as f:
        for line in f:
            m = ROW.match(line)
            if m:
                table[int(m.group(3), 16)] = (m.group(2), [m.group(i) for i in range(4, 8)])
    return table


def s32(w):
    return w - (1 << 32) if w & 0x80000000 else w


def describe(table, words):
    """A readable comment for one instruction: mnemonic and operands by kind."""
    op, ops = words[0], words[1:]
    if op not in table:
        return "unknown opcode 0x%08X" % op
    name, kinds = table[op]
    parts = []
    for kind, w in zip(kinds, ops):
        if kind in ("RD", "RS"):
            parts.append("r%d" % w)
        elif kind in ("TD", "TS"):
            parts.append("t%d" % w)
        elif kind == "IMM":
            parts.append("%d" % s32(w))
        elif kind == "IMMLO":
            value = ops[kinds.index("IMMHI")] << 32 | w
            parts.append("0x%016X" % value)
        elif kind == "TGT":
            parts.append("@%d" % w)
        elif kind == "FN":
            parts.append("fn%d" % w)
        elif kind == "HOST":
            parts.append("import%d" % w)
        elif kind == "CONST":
            parts.append("K%d" % w)
        elif kind in ("COUNT", "DTYPE"):
            parts.append("%d" % w)
    return name + (" " + ", ".join(parts) if parts else "")


def code_section(blob, path):
    """The code section's words, read through the header and section table."""
    if len(blob) < 32 or blob[:4] != b"\x7fBIB":
        raise ValueError("%s: not a .bib module" % path)
    count, table = struct.unpack_from("<II", blob, 12)
    for i in range(count):
        stype, _flags, offset, size = struct.unpack_from("<IIII", blob, table + 16 * i)
        if stype == 1:
            if size % 20 or offset + size > len(blob):
                raise ValueError("%s: malformed code section" % path)
            return struct.unpack_from("<%dI" % (size // 4), blob, offset)
    raise ValueError("%s: no code section" % path)


def split_sections(text):
    """[(header or None, [lines])]: the description first, then each `-- name` section."""
    parts = [(None, [])]
    for line in text.splitlines(keepends=True):
        if line.startswith("-- "):
            parts.append((line, []))
        else:
            parts[-1][1].append(line)
    return parts


def section_name(header):
    return header[3:].split()[0] if header and len(header) > 3 and header[3:].split() else ""


def assemble(bib, source, name):
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, name + ".basm")
        out = os.path.join(tmp, name + ".bib")
        with open(src, "w") as f:
            f.write(source)
        proc = subprocess.run([bib, "asm", src, "-o", out], capture_output=True, text=True)
        if proc.returncode != 0:
            raise ValueError(proc.stderr.strip() or "bib asm failed")
        with open(out, "rb") as f:
            return f.read()


def raw_lines(table, words):
    lines = []
    for i in range(0, len(words), 5):
        insn = words[i : i + 5]
        hexwords = " ".join("%08x" % w for w in insn)
        lines.append("%s  ; %s\n" % (hexwords, describe(table, insn)))
    return lines


def process(path, bib, table, print_only):
    with open(path) as f:
        text = f.read()
    parts = split_sections(text)
    names = [section_name(h) for h, _ in parts]
    if "asm" not in names:
        return "skipped (no -- asm)"
    if "error" in names:
        err = "".join(parts[names.index("error")][1]).strip()
        if err.startswith("asm:"):
            return "skipped (expects an asm error)"
    source = "".join(parts[names.index("asm")][1])
    base = os.path.splitext(os.path.basename(path))[0]
    blob = assemble(bib, source, base)
    raw = raw_lines(table, code_section(blob, path))
    if print_only:
        sys.stdout.write("".join(raw))
        return None
    if "raw" in names:
        i = names.index("raw")
        parts[i] = (parts[i][0], raw)
    else:
        i = names.index("asm")
        parts.insert(i + 1, ("-- raw\n", raw))
    new = "".join((h or "") + "".join(body) for h, body in parts)
    if new != text:
        with open(path, "w") as f:
            f.write(new)
        return "updated"
    return "unchanged"


def main(argv):
    bib = os.path.join(ROOT, "build", "bib")
    print_only = False
    paths = []
    args = iter(argv)
    for a in args:
        if a == "--print":
            print_only = True
        elif a == "--bib":
            bib = next(args)
        elif a in ("-h", "--help"):
            sys.stdout.write(__doc__)
            return 0
        else:
            paths.append(a)
    if not paths:
        sys.stderr.write("usage: hexgen.py [--print] [--bib PATH] CASE.hex...\n")
        return 64
    table = load_opcodes()
    failed = 0
    for path in paths:
        try:
            status = process(path, bib, table, print_only)
        except (OSError, ValueError) as e:
            sys.stderr.write("%s: %s\n" % (path, e))
            failed += 1
            continue
        if status and not print_only:
            print("%s: %s" % (path, status))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
