# tests/cli/repl_tab.py BIB CACHE_DIR: drives `bib repl` on a pseudo-terminal
# (libedit is on only there), types "LDI r7, 41", then "HAL<Tab>r7", and
# prints what the terminal showed: Tab must have completed HALT.
import os, pty, sys, time, select
bib = sys.argv[1]
pid, fd = pty.fork()
if pid == 0:
    os.environ['XDG_CACHE_HOME'] = sys.argv[2]
    os.execv(bib, [bib, 'repl'])
def read_for(t):
    out = b''
    end = time.time() + t
    while time.time() < end:
        r, _, _ = select.select([fd], [], [], 0.05)
        if r:
            try:
                out += os.read(fd, 4096)
            except OSError:
                break
    return out
read_for(1.0)
os.write(fd, b'LDI r7, 41\n')
read_for(0.5)
os.write(fd, b'HAL\tr7\n')
out = read_for(1.0)
os.write(fd, b':quit\n')
read_for(0.5)
sys.stdout.write(out.decode('utf-8', 'replace'))
