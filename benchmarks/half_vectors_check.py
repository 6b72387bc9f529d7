"""Every float32 through the vectorize pass's half-type rounding (cpu/half_vectors.py's NARROW_VECTOR, 16
lanes at a time) and every 16-bit pattern through its widening (WIDEN_VECTOR), against the scalar
conversions (cpu/renderer.py's HALF), compiled with the kernels' flags: prints, for float16 and bfloat16,
how many of the 2**32 floats round to other bits and how many of the 2**16 patterns widen to other bits (the
claim: none). About twenty seconds of one core.

    python -m benchmarks.half_vectors_check
"""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

from stage3_compiler.cpu.compiler import FLAGS, compiler
from stage3_compiler.cpu.half_vectors import NARROW_VECTOR, WIDEN_VECTOR
from stage3_compiler.cpu.renderer import HALF

TYPES = """
typedef float floatx16 __attribute__((vector_size(64)));
typedef unsigned int uint32x16 __attribute__((vector_size(64)));
typedef unsigned short uint16x16 __attribute__((vector_size(32)));
"""

CHECK = r"""
#include <stdint.h>
#include <stdio.h>
#include <string.h>

static int check(const char* name, int bfloat) {
  unsigned long long narrow_off = 0, widen_off = 0;
  for (uint64_t start = 0; start < (1ull << 32); start += 16) {
    uint32x16 u;
    for (int k = 0; k < 16; k++) u[k] = (uint32_t)(start + k);
    floatx16 x = (floatx16)u;
    uint32x16 got = bfloat ? NARROW_BF16(x) : NARROW_F16(x);
    for (int k = 0; k < 16; k++) {
      unsigned short want = bfloat ? sitp_to_bf16(x[k]) : sitp_to_f16(x[k]);
      narrow_off += got[k] != want;
    }
  }
  for (uint32_t start = 0; start < (1u << 16); start += 16) {
    uint32x16 bits;
    for (int k = 0; k < 16; k++) bits[k] = start + k;
    floatx16 got = bfloat ? WIDEN_BF16(bits) : WIDEN_F16(bits);
    for (int k = 0; k < 16; k++) {
      float want = bfloat ? sitp_from_bf16((unsigned short)bits[k]) : sitp_from_f16((unsigned short)bits[k]);
      widen_off += memcmp(&got[k], &want, 4) != 0;
    }
  }
  printf("%s: floats rounded to other bits: %llu of 2^32; patterns widened to other bits: %llu of 2^16\n",
         name, narrow_off, widen_off);
  return narrow_off != 0 || widen_off != 0;
}

int main(void) {
  int bad = check("float16", 0);
  return bad | check("bfloat16", 1);
}
"""


def macros() -> str:
    """The vector formulas as function-like macros of 16 lanes."""
    names = {"float16": "F16", "bfloat16": "BF16"}
    lines = [f"#define NARROW_{names[h]}(X) {f.format(n=16, x='X')}" for h, f in NARROW_VECTOR.items()]
    lines += [f"#define WIDEN_{names[h]}(B) {f.format(n=16, bits='B')}" for h, f in WIDEN_VECTOR.items()]
    return "\n".join(lines)


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        src, exe = Path(tmp) / "check.c", Path(tmp) / "check"
        src.write_text(HALF + TYPES + macros() + CHECK)
        flags = [f for f in FLAGS if f not in ("-shared", "-fPIC")] + ["-march=native"]
        subprocess.run([compiler(), *flags, "-o", str(exe), str(src)], check=True)
        subprocess.run([str(exe)], check=True)


if __name__ == "__main__":
    main()
