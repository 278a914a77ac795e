"""tests/cli/repl_random.py: a random `bib repl` session, for comparing the
REPL's two paths (tests/cli/command.sh): each line spliced into the loaded
module (bib_vm_extend) against the whole session assembled and reloaded.

    repl_random.py SEED LINES

Prints LINES typed lines: scalar and float arithmetic, constants of both
types (both zeros among them), labels alone and on instructions (some named
like functions, some defined twice), branches back (bounded by a counter)
and forward (to labels not yet defined: refused), calls, function
references and indirect calls, host calls (new imports), tensors allocated,
freed, read and added (some after their FREE: refused), division by zero
(a trap), lines that do not assemble, and new functions and directives
between them.
"""

import random
import sys

seed, count = int(sys.argv[1]), int(sys.argv[2])
rnd = random.Random(seed)
out = []
labels = []  # labels of main defined so far
funcs = ["g0", "g1"]


def reg():
    return "r%d" % rnd.randrange(1, 12)


def emit(line):
    out.append(line)


emit(".tensor w t1 f32[2] = 1, 2")
for f in funcs:
    emit(".func %s args=1 regs=2" % f)
    emit("    ADDI r1, r0, %d" % rnd.randrange(100))
    emit("    RET r1")
    emit(".end")
emit("LDI r21, 40")  # the bound on branches back taken
emit("LDI r12, 3")

kinds = [
    "ldi", "addi", "add", "mul", "ldk", "ldk", "label", "label_insn", "back", "forward",
    "call", "fnref", "host", "alloc", "free", "thash", "tadd", "div", "bad", "func",
    "comment_twice", "nop",
]
while len(out) < count:
    k = rnd.choice(kinds)
    if k == "ldi":
        emit("LDI %s, %d" % (reg(), rnd.randrange(-50, 50)))
    elif k == "addi":
        emit("ADDI %s, %s, %d" % (reg(), reg(), rnd.randrange(-5, 6)))
    elif k == "add":
        emit("ADD %s, %s, %s" % (reg(), reg(), reg()))
    elif k == "mul":
        emit("MUL %s, %s, %s" % (reg(), reg(), reg()))
    elif k == "ldk":
        v = rnd.choice(["1.5", "-0.0", "0.0", "0", "1", "2.25", "-7", "%d.5" % rnd.randrange(30)])
        emit("LDK %s, =%s" % (reg(), v))
    elif k in ("label", "label_insn"):
        name = rnd.choice(["l%d" % len(out), "l%d" % len(out), rnd.choice(funcs)] + labels[-3:])
        labels.append(name)
        emit(name + ":" if k == "label" else "%s: ADDI %s, %s, 1" % (name, reg(), reg()))
    elif k == "back" and labels:
        emit("ADDI r20, r20, 1")
        emit("JLT r20, r21, %s" % rnd.choice(labels))
    elif k == "forward":
        emit("JMP ahead%d" % rnd.randrange(3))
    elif k == "call":
        emit("CALL %s, %s, %s, 1" % (reg(), rnd.choice(funcs), reg()))
    elif k == "fnref":
        emit("FNREF r13, %s" % rnd.choice(funcs))
        emit("CALLR %s, r13, %s, 1" % (reg(), reg()))
    elif k == "host":
        emit("HOSTCALL r0, %s, %s, 1" % (rnd.choice(["print_i64", "print_f64"]), reg()))
    elif k == "alloc":
        t = rnd.choice(["t3", "t4"])
        emit("ALLOC %s, f32, r12, 1" % t)
    elif k == "free":
        t = rnd.choice(["t3", "t4"])
        emit("FREE %s" % t)
    elif k == "thash":
        emit("THASH %s, %s" % (reg(), rnd.choice(["t1", "t3", "t4"])))
    elif k == "tadd":
        emit("TADD t5, t1, t1")
    elif k == "div":
        emit("DIV %s, %s, %s" % (reg(), reg(), rnd.choice([reg(), "r0"])))
    elif k == "bad":
        emit(rnd.choice(["ADD r1, r2", "BOGUS r1", "JMP", "LDK r1, =", "ADDI r99, r1, 1"]))
    elif k == "func":
        name = "g%d" % len(funcs)
        funcs.append(name)
        emit(".func %s args=1 regs=2" % name)
        emit("    MUL r1, r0, r0")
        emit("    RET r1")
        emit(".end")
        if rnd.random() < 0.3:
            emit(".asciz s%d \"x\"" % len(out))
    elif k == "comment_twice" and labels:
        name = rnd.choice(labels)
        emit("ADDI r20, r20, 1 ; %s %s" % (name, name))
        emit("JLT r20, r21, %s ; back to %s" % (name, name))
    elif k == "nop":
        emit("NOP")
print("\n".join(out))
