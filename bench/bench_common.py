"""What the benchmark scripts share: the CPU's name for labelling figures, and a median time."""

import platform
import statistics
import time


def cpu_name():
    """The CPU's model name from /proc/cpuinfo (the platform's processor string elsewhere)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def median_ms(f, runs=7, warm=2):
    """The median of `runs` timed calls of `f` after `warm` untimed ones, in milliseconds."""
    for _ in range(warm):
        f()
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        f()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3
