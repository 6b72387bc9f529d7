"""Where a kernel's compile time goes: the C of two generated kernels (a matmul tile with its bias and
relu, and a GELU elementwise kernel) built by the system compiler in the ways stage3 could build
it, each the median of RUNS runs as a whole compiler process, then the cost of loading the library:
`python -m benchmarks.compile_cost` (flags as cpu/compiler.py's, the variants as printed)."""

import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from stage3_compiler import Tensor
from stage3_compiler.codegen.lower import lower
from stage3_compiler.cpu.compiler import compiler, direct_link, flags
from stage3_compiler.cpu.runtime import cpu_runtime
from stage3_compiler.engine.schedule import create_schedule

RUNS = 7


def sources() -> dict[str, str]:
    rng = np.random.default_rng(0)
    x, w, b = (Tensor(rng.standard_normal(s).astype(np.float32)).realize() for s in ((64, 128), (128, 256), (256,)))
    out = {}
    for label, t in (("matmul+bias+relu", (x @ w + b).relu()), ("gelu", x.gelu())):
        items = create_schedule([t.lazydata])
        out[label] = cpu_runtime.renderer.render(lower(items[-1], cpu_runtime.renderer))
    return out


def timed(cmd: list[str]) -> float:
    times = []
    for _ in range(RUNS):
        start = time.perf_counter()
        subprocess.run(cmd, check=True, capture_output=True)
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def main() -> None:
    cc, base = compiler(), [f for f in flags() if f not in ("-shared", "-O3")]
    print(f"{cc}: {' '.join(base)}; {sys.platform}; median of {RUNS} processes, ms")
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        for label, source in sources().items():
            c = d / "k.c"
            c.write_text(source)
            rows = {
                "a process start (cc --version)": [cc, "--version"],
                "parse only (-fsyntax-only)": [cc, *base, "-fsyntax-only", str(c)],
                "-O3 to an object (-c)": [cc, "-O3", *base, "-c", "-o", str(d / "k.o"), str(c)],
                "link that object (-shared)": [cc, "-shared", "-fopenmp", "-o", str(d / "k2.so"), str(d / "k.o"),
                                               "-lm"],
                "-O3 -shared (the driver links)": [cc, "-O3", *base, "-shared", "-o", str(d / "k.so"), str(c),
                                                   "-lm"],
                "-O3 -shared -pipe": [cc, "-O3", *base, "-pipe", "-shared", "-o", str(d / "k.so"), str(c), "-lm"],
                "-O2 -shared": [cc, "-O2", *base, "-shared", "-o", str(d / "k.so"), str(c), "-lm"],
                "-O1 -shared": [cc, "-O1", *base, "-shared", "-o", str(d / "k.so"), str(c), "-lm"],
            }
            link = direct_link()
            if link is not None:
                rows["link that object with ld alone"] = link.command(d / "k.o", d / "k3.so")
            print(f"\n{label} ({len(source.splitlines())} lines of C)")
            for name, cmd in rows.items():
                if "link" in name:
                    subprocess.run(rows["-O3 to an object (-c)"], check=True)
                print(f"  {name:<34} {timed(cmd):7.1f}")
            if link is not None:
                together = d / "both.sh"
                together.write_text(" ".join(rows["-O3 to an object (-c)"]) + " && " + " ".join(link.command(
                    d / "k.o", d / "k3.so")) + "\n")
                print(f"  {'-O3 -c, then ld alone (today)':<34} {timed(['sh', str(together)]):7.1f}")
            subprocess.run(rows["-O3 -shared (the driver links)"], check=True)
            # dlopen in a child process: a library linked with -fopenmp, loaded and its file removed
            # with the temporary directory, crashed this process at exit
            lib = str(d / "k.so")
            probe = f"import ctypes, time; s = time.perf_counter(); ctypes.CDLL({lib!r}); " \
                "print(time.perf_counter() - s)"
            loads = [float(subprocess.run([sys.executable, "-c", probe], check=True, capture_output=True,
                                          text=True).stdout) for _ in range(RUNS)]
            print(f"  {'dlopen (ctypes.CDLL)':<34} {statistics.median(loads) * 1e3:7.2f}")

if __name__ == "__main__":
    main()
