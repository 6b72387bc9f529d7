"""Every float32 through stage3's EXP2 formula (renderer.EXP2F), against 2**x computed in float64 and
rounded once, compiled with the flags the kernels use: prints how many of the 2**32 inputs are more
than 1 ulp off (the claim: none) and the worst distance. About a minute of one core.

    python -m benchmarks.exp2f_check
"""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

from stage3_compiler.cpu.compiler import FLAGS, compiler
from stage3_compiler.cpu.renderer import EXP2F

CHECK = r"""
#include <stdint.h>
#include <stdio.h>
#include <string.h>

int main(void) {
  unsigned long long beyond = 0, worst = 0, nan_kept = 1;
  float worst_x = 0.0f;
  for (uint64_t bits = 0; bits < (1ull << 32); bits++) {
    uint32_t u = (uint32_t)bits;
    float x;
    memcpy(&x, &u, 4);
    float got = sitp_exp2f(x);
    if (x != x) { nan_kept &= got != got; continue; }
    float want = (float)exp2((double)x);
    int32_t a, b;
    memcpy(&a, &got, 4);
    memcpy(&b, &want, 4);
    unsigned long long d = a > b ? (unsigned long long)((int64_t)a - b) : (unsigned long long)((int64_t)b - a);
    if (d > 1) beyond++;
    if (d > worst) { worst = d; worst_x = x; }
  }
  printf("floats more than 1 ulp off: %llu; worst %llu ulp at x = %a; NaN stays NaN: %s\n",
         beyond, worst, worst_x, nan_kept ? "yes" : "no");
  return beyond != 0 || !nan_kept;
}
"""


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        src, exe = Path(tmp) / "check.c", Path(tmp) / "check"
        src.write_text("#include <math.h>\n" + EXP2F + CHECK)
        flags = [f for f in FLAGS if f not in ("-shared", "-fPIC")] + ["-march=native"]
        subprocess.run([compiler(), *flags, "-o", str(exe), str(src), "-lm"], check=True)
        subprocess.run([str(exe)], check=True)


if __name__ == "__main__":
    main()
