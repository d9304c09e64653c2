#!/usr/bin/env python3
"""Samples the state of a process's threads every 5 ms for SECONDS and prints, per thread,
how often it was running (R), sleeping (S, with the kernel function it waits in: futex,
epoll, nanosleep...) or in uninterruptible I/O wait (D, with its wchan). A profile shows
where CPU goes; this shows where a thread waits instead, e.g. a writer idle for lack of work
or flush workers waiting for the disk (docs/performance.md, "What limits each figure").

    scripts/thread-states.py PID SECONDS [THREAD-NAME-PREFIX ...]
"""
import collections
import os
import sys
import time

if len(sys.argv) < 3:
    sys.exit(__doc__)
pid, seconds = sys.argv[1], float(sys.argv[2])
prefixes = tuple(sys.argv[3:]) or ("spindle-writer", "fjall:worker", "tokio-rt-worker")
counts = collections.Counter()
end = time.time() + seconds
while time.time() < end:
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            comm = open(f"/proc/{pid}/task/{tid}/comm").read().strip()
            state = open(f"/proc/{pid}/task/{tid}/stat").read().rsplit(")", 1)[1].split()[0]
            wchan = open(f"/proc/{pid}/task/{tid}/wchan").read().strip()
        except OSError:
            continue
        if comm.startswith(prefixes):
            counts[(f"{comm}/{tid}", state, "" if state == "R" else wchan)] += 1
    time.sleep(0.005)
per_thread = collections.Counter()
for (thread, _, _), n in counts.items():
    per_thread[thread] += n
for (thread, state, wchan), n in sorted(counts.items()):
    print(f"{thread:28} {state} {100 * n / per_thread[thread]:5.1f}%  {wchan}")
