#!/usr/bin/env python3
"""Samples a process's cumulative write count and CPU time at a fixed period.

Why: scripts/bench-tomcat.sh's attach mode needs requests per second without adding
anything to the request path. Every HTTP response of one page is the same number of
bytes, so the JVM's `wchar` (/proc/PID/io: bytes passed to write-like system calls)
counts responses; reading two small /proc files once a second costs the server
nothing. The JVM's own log files (jit.log, catalina.log: FILE...) are written with the
same system calls, so their total size is sampled too, to be subtracted (thousands of
"made not entrant" lines right after an attach would otherwise count as requests). The
machine's busy CPU (/proc/stat) says how much else ran. Samples are taken on a fixed
schedule of the monotonic clock (no drift) and stamped with the wall clock, which the
script's event times also use.

usage: procsample.py PID PERIOD_SECONDS [FILE...]   (CSV on stdout:
       t,wchar,utime,stime,logs,busy; until SIGTERM or the process ends)
"""

import os

import signal
import sys
import time


def sample(pid):
    """(wchar, utime, stime) of the process; utime and stime in clock ticks."""
    with open(f"/proc/{pid}/io") as f:
        wchar = next(int(line.split()[1]) for line in f if line.startswith("wchar:"))
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return wchar, int(fields[11]), int(fields[12])


def logs_size(paths):
    """Total size of the files that exist among paths."""
    total = 0
    for p in paths:
        try:
            total += os.stat(p).st_size
        except OSError:
            pass
    return total


def busy():
    """Busy ticks of all CPUs (user, nice, system, irq, softirq) from /proc/stat."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return v[0] + v[1] + v[2] + v[5] + v[6]


def main(argv):
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    pid, period, files = int(argv[1]), float(argv[2]), argv[3:]
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    print("t,wchar,utime,stime,logs,busy", flush=True)
    next_at = time.monotonic()
    while True:
        try:
            wchar, utime, stime = sample(pid)
        except (OSError, StopIteration):
            return 0
        print(f"{time.time():.3f},{wchar},{utime},{stime},{logs_size(files)},{busy()}", flush=True)
        next_at += period
        time.sleep(max(0.0, next_at - time.monotonic()))


if __name__ == "__main__":
    sys.exit(main(sys.argv))
