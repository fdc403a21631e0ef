#!/usr/bin/python3
# Runs a program under the system-call filter fusiond.service asks systemd for:
#   SystemCallFilter=@system-service, SystemCallFilter=~@privileged @resources,
#   SystemCallErrorNumber=EPERM, SystemCallArchitectures=native
# (the sets expanded by this machine's `systemd-analyze syscall-filter`). Calls outside the
# set return EPERM (run it under `strace -f -Z` to see which ones a run was refused).
import errno, os, subprocess, sys
import seccomp

def expand(name, seen=None):
    seen = seen if seen is not None else set()
    out = subprocess.run(["systemd-analyze", "syscall-filter", name], capture_output=True, text=True, check=True).stdout
    calls = set()
    for line in out.splitlines()[1:]:
        t = line.strip()
        if not t or t.startswith("#"): continue
        if t.startswith("@"):
            if t not in seen:
                seen.add(t); calls |= expand(t, seen)
        else:
            calls.add(t)
    return calls

allowed = expand("@system-service") - expand("@privileged") - expand("@resources")
f = seccomp.SyscallFilter(defaction=seccomp.ERRNO(errno.EPERM))
n = 0
for c in sorted(allowed):
    try:
        f.add_rule(seccomp.ALLOW, c); n += 1
    except Exception:
        pass  # not a syscall on this architecture
print(f"sysfilter: {n} system calls allowed", file=sys.stderr)
f.load()
os.execv(sys.argv[1], sys.argv[1:])
