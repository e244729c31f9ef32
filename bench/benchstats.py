"""What the benchmark scripts share: their --setup NAME=ARGS, a VMM binary
given as a file or a build directory, nearest-rank percentiles, the spread
of per-run figures, and the load average."""
import os
import shlex
import statistics


def parse_setup(spec):
    """NAME=ARGS -> (NAME, [args]); ValueError when malformed."""
    name, eq, rest = spec.partition("=")
    name = name.strip()
    if not eq or not name or any(c.isspace() for c in name):
        raise ValueError(f"--setup {spec!r}: expected NAME=ARGS")
    return name, shlex.split(rest)


def vmm_binary(path):
    """A VMM binary, or a build directory holding one."""
    return os.path.join(path, "vmm") if os.path.isdir(path) else path


def pct(sorted_vals, p):
    """Nearest-rank percentile of a sorted list."""
    if not sorted_vals:
        return None
    k = max(1, -(-len(sorted_vals) * p // 100))
    return sorted_vals[int(k) - 1]


def spread(vals):
    """{median, min, max} of per-run figures, or Nones."""
    if not vals:
        return {"median": None, "min": None, "max": None}
    return {"median": statistics.median(vals), "min": min(vals),
            "max": max(vals)}


def check_setups(prog, names, what="setup"):
    """Exits with a message when a setup name is used twice or there is
    none to run."""
    dup = {n for n in names if names.count(n) > 1}
    if dup:
        raise SystemExit(f"{prog}: setup names used twice: "
                         f"{', '.join(sorted(dup))}")
    if not names:
        raise SystemExit(f"{prog}: no {what} to run")


def loadavg():
    return [round(x, 2) for x in os.getloadavg()]
