"""Every float32 through stage3's EXP2 and LOG2 formulas (renderer.EXP2F, renderer.LOG2F), against 2**x and
log2(x) computed in float64 and rounded once, compiled with the flags the kernels use: prints how many of the
2**32 inputs are more than 1 ulp off (the claim: none), the worst distance, and whether NaN, the infinities
and -0.0 come out as C's. About a minute of one core each.

    python -m benchmarks.exp2f_check
"""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

from stage3_compiler.cpu.compiler import FLAGS, compiler
from stage3_compiler.cpu.renderer import EXP2F, LOG2F

CHECK = r"""
#include <stdint.h>
#include <stdio.h>
#include <string.h>

static int check(const char* name, float (*ours)(float), double (*ref)(double)) {
  unsigned long long beyond = 0, worst = 0, specials_kept = 1;
  float worst_x = 0.0f;
  for (uint64_t bits = 0; bits < (1ull << 32); bits++) {
    uint32_t u = (uint32_t)bits;
    float x;
    memcpy(&x, &u, 4);
    float got = ours(x), want = (float)ref((double)x);
    if (want != want || want == 1.0f / 0.0f || want == -1.0f / 0.0f) {  /* NaN, inf, -inf: as C's */
      specials_kept &= (got != got && want != want) || got == want;
      continue;
    }
    int32_t a, b;
    memcpy(&a, &got, 4);
    memcpy(&b, &want, 4);
    unsigned long long d = a > b ? (unsigned long long)((int64_t)a - b) : (unsigned long long)((int64_t)b - a);
    if (d > 1) beyond++;
    if (d > worst) { worst = d; worst_x = x; }
  }
  printf("%s: floats more than 1 ulp off: %llu; worst %llu ulp at x = %a; NaN and infinities as C's: %s\n",
         name, beyond, worst, worst_x, specials_kept ? "yes" : "no");
  return beyond != 0 || !specials_kept;
}

static float exp2_ours(float x) { return sitp_exp2f(x); }
static float log2_ours(float x) { return sitp_log2f(x); }

int main(void) {
  int bad = check("exp2", exp2_ours, exp2);
  return bad | check("log2", log2_ours, log2);
}
"""

def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        src, exe = Path(tmp) / "check.c", Path(tmp) / "check"
        src.write_text("#include <math.h>\n" + EXP2F + "\n" + LOG2F + CHECK)
        flags = [f for f in FLAGS if f not in ("-shared", "-fPIC")] + ["-march=native"]
        subprocess.run([compiler(), *flags, "-o", str(exe), str(src), "-lm"], check=True)
        subprocess.run([str(exe)], check=True)


if __name__ == "__main__":
    main()
