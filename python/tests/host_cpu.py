"""The host CPU's feature flags as Linux lists them, for tests whose checks depend on them."""


def host_flags():
    """The `flags` of /proc/cpuinfo's first CPU (empty where there is no such file)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()
