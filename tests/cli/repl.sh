#!/bin/sh
# CLI tests for `bib repl`: sessions driven through stdin (not a terminal, so
# no prompt, banner or line-editing escapes) and compared byte for byte with
# the expected transcripts (stdout and stderr together). Covers instructions
# run at once against preserved state, labels and functions carried over,
# assembly errors with repl:LINE:COL (the session goes on), traps (the state
# stays), data directives, :load with breakpoints by label, function and
# pc, stepping, frames, registers, memory and tensors.
# Prints one line per check and "N passed, N failed" at the end.
. "$(dirname "$0")/lib/common.sh"

# transcript NAME: runs $T/NAME.in through the repl and compares with $T/NAME.want
transcript() {
    name=$1
    shift
    "$BIB" repl "$@" <"$T/$name.in" >"$T/$name.got" 2>&1
    rc=$?
    if [ $rc -eq 0 ] && cmp -s "$T/$name.want" "$T/$name.got"; then ok "$name"; else
        bad "$name (exit $rc):"
        diff -u "$T/$name.want" "$T/$name.got" | head -40
    fi
}

cat >"$T/interactive-session.in" <<'IN'
; a comment line does nothing
LDI r1, 5
LDI r2, 7
ADD r3, r1, r2
ADDD r4, r1
ADD r4, r1, nowhere
HOSTCALL r0, print_i64, r3, 1
loop:
    ADDI r1, r1, 1
    LDI r5, 10
    JLT r1, r5, loop
.func sq args=1
    MUL r0, r0, r0
    RET r0
.end
CALL r6, sq, r3, 1
DIV r7, r1, r0
LDI r7, 1
msg: .asciz "hi"
.memory 16
LDI r8, msg
LOAD8U r9, r8, 1
:mem 0 4
:regs
:where
:list
:bogus
:reset
:regs
:quit
LDI r1, 1
IN
cat >"$T/interactive-session.want" <<'WANT'
r1 = 5 (0x5)
r2 = 7 (0x7)
r3 = 12 (0xc)
repl:5:1: error: unknown mnemonic 'ADDD'
ADDD r4, r1
^~~~
repl:6:13: error: expected a register (r0, r1, ...), found 'nowhere'
ADD r4, r1, nowhere
            ^~~~~~~
12
r1 = 6 (0x6)
r5 = 10 (0xa)
r1 = 10 (0xa)
r6 = 144 (0x90)
bib: trap at pc 10 (DIV r7, r1, r0) line 17: division by zero
r7 = 1 (0x1)
r9 = 105 (0x69)
00000000: 68 69 00 00                                      |hi..|
main (pc 14):
r0 = 0 (0x0)
r1 = 10 (0xa)
r2 = 7 (0x7)
r3 = 12 (0xc)
r4 = 0 (0x0)
r5 = 10 (0xa)
r6 = 144 (0x90)
r7 = 1 (0x1)
r8 = 0 (0x0)
r9 = 105 (0x69)
halted at pc 14 in main: HALT r0
msg: .asciz "hi"
.memory 16
.func sq args=1
    MUL r0, r0, r0
    RET r0
.end
.func main
LDI r1, 5
LDI r2, 7
ADD r3, r1, r2
HOSTCALL r0, print_i64, r3, 1
loop:
    ADDI r1, r1, 1
    LDI r5, 10
    JLT r1, r5, loop
CALL r6, sq, r3, 1
DIV r7, r1, r0
LDI r7, 1
LDI r8, msg
LOAD8U r9, r8, 1
    HALT r0
.end
bib: unknown command ':bogus' (:help lists them)
session reset
bib: nothing to run: type instructions, or :load FILE
WANT
transcript interactive-session

cat >"$T/file-session-with-breakpoints.in" <<'IN'
:load examples/fib.basm
:break small
:break fib
:break
:continue
:bt
:regs
:delete fib
:continue
:step 2
:where
:delete
:continue
:step
LDI r0, 1
:run
:break 99
:break nosuch
:quit
IN
cat >"$T/file-session-with-breakpoints.want" <<'WANT'
loaded at pc 0 in main line 3: LDI r0, 32
breakpoint at pc 10: RET r0
breakpoint at pc 4: JLTI r0, 2, small
breakpoint at pc 4: JLTI r0, 2, small
breakpoint at pc 10: RET r0
breakpoint at pc 4 in fib line 11 depth 2: JLTI r0, 2, small
#0 pc 4 in fib line 11: JLTI r0, 2, small
#1 pc 1 in main line 4: CALL r1, fib, r0, 1
fib (pc 4):
r0 = 32 (0x20)
r1 = 0 (0x0)
r2 = 0 (0x0)
r3 = 0 (0x0)
cleared breakpoint at pc 4: JLTI r0, 2, small
breakpoint at pc 10 in fib line 18 depth 33: RET r0
paused at pc 8 in fib line 15 depth 32: CALL r3, fib, r1, 1
paused at pc 8 in fib line 15 depth 32: CALL r3, fib, r1, 1
no breakpoints
2178309
halted: exit value 0
bib: the program has finished: :run starts it again
bib: a file is loaded: instructions typed at the prompt need an interactive session (:reset)
2178309
halted: exit value 0
bib: no pc, function or label '99'
bib: no pc, function or label 'nosuch'
WANT
transcript file-session-with-breakpoints

cat >"$T/tensors-and-calls.in" <<'IN'
LDI r1, 3
LDI r2, 4
ALLOC t0, f32, r1, 2
FILL t0, r1
:tensors
:tensor t0
CALL r3, f, r1, 1
.func f args=1
    LDI r1, 2
    MUL r0, r0, r1
    RET r0
.end
:break f
CALL r3, f, r1, 1
LDI r4, 9
:bt
:continue
LDI r4, 9
:tensor t1
IN
cat >"$T/tensors-and-calls.want" <<'WANT'
r1 = 3 (0x3)
r2 = 4 (0x4)
t0 f32[3,4] on cpu hash=2fa64c4f2cafd1e1
t0 f32[3,4] on cpu hash=2fa64c4f2cafd1e1
[0, 0, 0, 0, 0, 0, 0, 0, ...]
repl:7:10: error: unknown function 'f'
CALL r3, f, r1, 1
         ^
breakpoint at pc 0: LDI r1, 2
breakpoint at pc 0 in f line 9 depth 2: LDI r1, 2
bib: the program is paused in f (depth 2): :continue, :step or :run first
#0 pc 0 in f line 9: LDI r1, 2
#1 pc 7 in main line 14: CALL r3, f, r1, 1
r4 = 9 (0x9)
bib: no tensor register 't1' (the file has 1)
WANT
transcript tensors-and-calls

# Piped input never sees a prompt or an escape sequence.
printf 'LDI r0, 1
' | "$BIB" repl >"$T/plain" 2>&1
if [ "$(cat "$T/plain")" = "r0 = 1 (0x1)" ]; then ok "piped input prints no prompt"; else
    bad "piped input prints no prompt: $(od -c "$T/plain" | head -3)"
fi

# An input file given on the command line is loaded as by :load.
printf ':continue
' | "$BIB" repl examples/fib.basm >"$T/arg" 2>&1
if grep -q "^loaded at pc 0 in main" "$T/arg" && grep -q "^2178309$" "$T/arg"; then
    ok "bib repl FILE loads the file"
else
    bad "bib repl FILE loads the file: $(cat "$T/arg")"
fi

# The session ends at end of input inside a .func block with a message.
printf '.func f
  RET r0
' | "$BIB" repl >"$T/eof" 2>&1
if grep -q "input ended inside a .func block" "$T/eof"; then ok "end of input inside .func is reported"; else
    bad "end of input inside .func: $(cat "$T/eof")"
fi

# Tensors survive a switch of executor only through :run; Vulkan when present.
PY=${PYTHON:-/usr/bin/python3}
$PY tools/make-npy.py "$T/in" --n 3 --d 4 --h 5 --o 2 >/dev/null || bad "make-npy.py"
cat >"$T/mlp.in" <<IN
:load examples/mlp.basm
:input x=$T/in/x.npy
:input W1=$T/in/W1.npy
:input b1=$T/in/b1.npy
:input W2=$T/in/W2.npy
:input b2=$T/in/b2.npy
:run
:tensor y
IN
"$BIB" repl --backend=cpu <"$T/mlp.in" >"$T/mlp.cpu" 2>&1
if grep -q "^t5 (y) f32\[3,2\] on cpu hash=" "$T/mlp.cpu"; then ok "mlp in the repl on cpu"; else
    bad "mlp in the repl on cpu: $(cat "$T/mlp.cpu")"
fi
"$BIB" repl --backend=vulkan <"$T/mlp.in" >"$T/mlp.vk" 2>&1
if grep -q "not available" "$T/mlp.vk"; then
    echo "SKIP: mlp in the repl on vulkan: $(grep "not available" "$T/mlp.vk")"
elif grep -q "^t5 (y) f32\[3,2\] on vulkan hash=" "$T/mlp.vk" &&
    [ "$(grep hash= "$T/mlp.vk" | sed 's/ on [a-z,]*//')" = "$(grep hash= "$T/mlp.cpu" | sed 's/ on [a-z,]*//')" ]; then
    ok "mlp in the repl on vulkan: same hash and elements, held by vulkan"
else
    bad "mlp in the repl on vulkan: $(cat "$T/mlp.vk")"
fi

# :backend refuses an executor that cannot start, and the session keeps its own.
printf ':backend tpu\n:backend\n' >"$T/backend.in"
cat >"$T/backend.want" <<'WANT'
bib: backend: unknown executor 'tpu' (choose cpu, vulkan, cuda or auto)
backend cpu
WANT
transcript backend
printf 'LDI r1, 3\n:backend cuda\n:backend\n:regs\n' | "$BIB" repl >"$T/cuda.got" 2>&1
if grep -q "state reset" "$T/cuda.got"; then
    echo "SKIP: :backend cuda refused: the CUDA executor runs here"
elif grep -q "^bib: executor 'cuda' is not available: ." "$T/cuda.got" && grep -q "^backend cpu$" "$T/cuda.got" &&
    grep -q "^r1 = 3" "$T/cuda.got"; then
    ok ":backend cuda without CUDA: refused with the reason, the session and its state stay"
else
    bad ":backend cuda: $(cat "$T/cuda.got")"
fi

# Ctrl-C while a typed loop runs pauses it where it is: the session, its
# registers and its lines stay, and the next commands answer.
mkfifo "$T/spin.fifo"
trap '' PIPE # a repl that Ctrl-C ended closes the fifo: the writes below must not end this script
# A background job of sh starts with SIGINT ignored; a terminal's repl has it.
$PY -c 'import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); os.execvp(sys.argv[1], sys.argv[1:])' \
    "$BIB" repl <"$T/spin.fifo" >"$T/spin.got" 2>&1 &
repl_pid=$!
exec 3>"$T/spin.fifo"
# The session answers first (a loaded machine may be slow to start it), then
# the loop is typed and given a second to run.
printf 'LDI r9, 42\n' >&3
n=0
while ! grep -q "^r9 = 42" "$T/spin.got" 2>/dev/null && [ $n -lt 200 ]; do sleep 0.1; n=$((n + 1)); done
printf 'LDI r1, 0\nspin:\nADDI r1, r1, 1\nJMP spin\n' >&3
sleep 1
kill -INT $repl_pid 2>/dev/null
sleep 0.5
printf ':where\n:regs\n' >&3
exec 3>&-
wait $repl_pid
rc=$?
trap - PIPE
if [ $rc -eq 0 ] && grep -q "^interrupted by Ctrl-C at pc 3 in main line 5: JMP" "$T/spin.got" &&
    grep -q "^paused at pc 3 in main" "$T/spin.got" && grep -q "^main (pc 3):$" "$T/spin.got"; then
    ok "Ctrl-C pauses a running loop, and the session goes on"
else
    bad "Ctrl-C in the repl: exit $rc, $(cat "$T/spin.got")"
fi

# Ctrl-C while :call runs stops the call, not the session: the call's VM is
# dropped and the next lines answer.
mkfifo "$T/call.fifo"
trap '' PIPE
$PY -c 'import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); os.execvp(sys.argv[1], sys.argv[1:])' \
    "$BIB" repl <"$T/call.fifo" >"$T/call.got" 2>&1 &
repl_pid=$!
exec 3>"$T/call.fifo"
printf '.func spin\ntop:\n    ADDI r0, r0, 1\n    JMP top\n.end\nLDI r9, 42\n' >&3
n=0
while ! grep -q "^r9 = 42" "$T/call.got" 2>/dev/null && [ $n -lt 200 ]; do sleep 0.1; n=$((n + 1)); done
printf ':call spin\n' >&3
sleep 1
kill -INT $repl_pid 2>/dev/null
sleep 0.5
printf 'LDI r8, 7\n:where\n' >&3
exec 3>&-
wait $repl_pid
rc=$?
trap - PIPE
if [ $rc -eq 0 ] && grep -q "^interrupted by Ctrl-C at pc [0-9]* in spin line 3: " "$T/call.got" &&
    grep -q "^r8 = 7" "$T/call.got" && grep -q "^halted at pc [0-9]* in main" "$T/call.got"; then
    ok "Ctrl-C stops a :call, and the session goes on"
else
    bad "Ctrl-C during :call: exit $rc, $(cat "$T/call.got")"
fi

# On a terminal each line goes to the history file as it is entered: a
# session that Ctrl-C ends at the prompt keeps them.
mkdir -p "$T/xdg"
if XDG_CACHE_HOME="$T/xdg" $PY - "$BIB" <<'PY'; then
import os, pty, select, signal, sys, time
pid, fd = pty.fork()
if pid == 0:
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    os.execvp(sys.argv[1], [sys.argv[1], "repl"])
seen = b""
def wait_for(text):
    global seen
    end = time.time() + 20
    while text not in seen and time.time() < end:
        if select.select([fd], [], [], 0.1)[0]:
            try:
                seen += os.read(fd, 4096)
            except OSError:
                break
    return text in seen
ok = wait_for(b"bib> ")
os.write(fd, b"LDI r1, 7\r")
ok = ok and wait_for(b"r1 = 7")
ok = ok and wait_for(b"bib> ")
os.write(fd, b"\x03")
for _ in range(100):
    done, status = os.waitpid(pid, os.WNOHANG)
    if done:
        break
    time.sleep(0.1)
else:
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
sys.exit(0 if ok else 1)
PY
    # libedit writes a space as \040.
    if grep -qF -e 'LDI r1, 7' -e 'LDI\040r1,\0407' "$T/xdg/bib/repl_history" 2>/dev/null; then
        ok "a line entered on a terminal is in the history when Ctrl-C ends the session"
    else
        bad "history after Ctrl-C at the prompt: $(cat "$T/xdg/bib/repl_history" 2>&1)"
    fi
else
    bad "history after Ctrl-C at the prompt: the terminal session did not answer"
fi

# An .input typed first is kept: the session waits for the input, as a
# loaded file does, and :run binds it.
cat >"$T/input-first.in" <<IN
.input x t0 f32[3, 4]
:where
LDI r1, 5
:input x=$T/in/x.npy
:list
:run
:tensors
IN
cat >"$T/input-first.want" <<'WANT'
bib: waiting for inputs x: :input NAME=PATH.npy, then :run
bib: waiting for inputs x: :input NAME=PATH.npy, then :run (the line is kept)
.input x t0 f32[3, 4]
.func main
LDI r1, 5
    HALT r0
.end
t0 (x) f32[3,4] on cpu hash=4a6bc8ca45c62ea9
WANT
transcript input-first

# A line that writes an input's register in place changes the session's
# tensor, not the input kept: :run starts again from the value given (the
# TADD runs once more, on it), on every executor.
cat >"$T/input-kept.in" <<IN
.input x t0 f32[3, 4]
:input x=$T/in/x.npy
:run
:tensor x 4
TADD t0, t0, t0
:tensor x 4
:run
:tensor x 4
IN
cat >"$T/input-kept.want" <<'WANT'
t0 (x) f32[3,4] on cpu hash=4a6bc8ca45c62ea9
[0.345584184, 0.82161814, 0.330437064, -1.30315721, ...]
t0 (x) f32[3,4] on cpu hash=096c0243124cf7a4
[0.691168368, 1.64323628, 0.660874128, -2.60631442, ...]
t0 (x) f32[3,4] on cpu hash=096c0243124cf7a4
[0.691168368, 1.64323628, 0.660874128, -2.60631442, ...]
WANT
transcript input-kept
"$BIB" repl --backend=vulkan <"$T/input-kept.in" >"$T/input-kept.vk" 2>&1
if grep -q "not available" "$T/input-kept.vk"; then
    echo "SKIP: an input written in place in the repl on vulkan: $(grep "not available" "$T/input-kept.vk")"
elif [ "$(sed 's/ on vulkan hash=/ on cpu hash=/' "$T/input-kept.vk")" = "$(cat "$T/input-kept.want")" ] &&
    grep -q "on vulkan hash=096c0243124cf7a4" "$T/input-kept.vk"; then
    ok "an input written in place in the repl on vulkan: :run starts again from the value given"
else
    bad "an input written in place in the repl on vulkan: $(cat "$T/input-kept.vk")"
fi

# ':' starts a command inside a .func block too; :reset abandons the block.
printf '.func f regs=1\n:reset\nLDI r0, 1\n.func g regs=1\n:quit\nLDI r1, 2\n' >"$T/block-commands.in"
cat >"$T/block-commands.want" <<'WANT'
session reset
r0 = 1 (0x1)
bib: input ended inside a .func block
WANT
transcript block-commands

# A FILE that cannot be loaded ends a piped session with the load's status.
"$BIB" repl "$T/nonexistent.basm" </dev/null >"$T/nofile.got" 2>&1
rc=$?
printf 'LDI r0,\n' >"$T/bad.basm"
"$BIB" repl "$T/bad.basm" </dev/null >"$T/badfile.got" 2>&1
rc2=$?
if [ $rc -eq 66 ] && grep -q "nonexistent.basm" "$T/nofile.got" && [ $rc2 -eq 65 ] &&
    grep -q "bad.basm:1" "$T/badfile.got"; then
    ok "bib repl FILE that cannot be loaded exits 66 or 65 when piped"
else
    bad "bib repl FILE that cannot be loaded: exit $rc, $rc2: $(cat "$T/nofile.got" "$T/badfile.got")"
fi

# :list of a loaded module is its disassembly.
"$BIB" asm examples/fib.basm -o "$T/fib.bib" >/dev/null 2>&1
"$BIB" dis "$T/fib.bib" >"$T/fib.dis" 2>&1
printf ':list\n' | "$BIB" repl "$T/fib.bib" 2>&1 | sed 1d >"$T/fib.list"
if [ -s "$T/fib.dis" ] && cmp -s "$T/fib.dis" "$T/fib.list"; then
    ok ":list of a .bib module is its disassembly"
else
    bad ":list of a .bib module: $(od -c "$T/fib.list" | head -3)"
fi

# :run stops at a breakpoint on its first instruction; :where of a file
# waiting for its inputs says which; :tensor N shows N elements.
cat >"$T/stops.in" <<'IN'
:break main
:run
:where
:continue
:load examples/mlp.basm
:where
:reset
LDI r1, 3
LDI r2, 4
ALLOC t0, f32, r1, 2
FILL t0, r1
:tensor t0 3
:tensor t0 12
:tensor t0 0
:tensor t0 x
IN
cat >"$T/stops.want" <<'WANT'
loaded at pc 0 in main line 3: LDI r0, 32
breakpoint at pc 0: LDI r0, 32
breakpoint at pc 0 in main line 3: LDI r0, 32
paused at pc 0 in main line 3: LDI r0, 32
2178309
halted: exit value 0
loaded examples/mlp.basm: give its inputs with :input NAME=PATH.npy, then :run
bib: waiting for inputs x, W1, b1, W2, b2: :input NAME=PATH.npy, then :run
session reset
r1 = 3 (0x3)
r2 = 4 (0x4)
t0 f32[3,4] on cpu hash=2fa64c4f2cafd1e1
[0, 0, 0, ...]
t0 f32[3,4] on cpu hash=2fa64c4f2cafd1e1
[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]
bib: usage: :tensor tN|NAME [N] (N: the elements shown, default 8)
bib: usage: :tensor tN|NAME [N] (N: the elements shown, default 8)
WANT
transcript stops examples/fib.basm

# :complete offers file names after :load and :input NAME=, and only
# labels and functions after :break.
mkdir -p "$T/npys"
: >"$T/npys/small.npy"
: >"$T/npys/second.npy"
cat >"$T/complete.in" <<IN
:complete :load examples/fi
:complete :input a=$T/npys/s
:complete :break 
IN
cat >"$T/complete.want" <<WANT
loaded at pc 0 in main line 3: LDI r0, 32
examples/fib.basm
$T/npys/second.npy
$T/npys/small.npy
fib
main
small
WANT
transcript complete examples/fib.basm

finish
