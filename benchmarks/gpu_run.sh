#!/usr/bin/env bash
# Issue 27: the one-shot run on a lent GPU. From the repository root, on the device machine:
#
#     bash benchmarks/gpu_run.sh [--smoke] [--only PART,PART...]
#
# with gpu_wheels/ carried (benchmarks/gpu_wheels.sh fetches it). Everything goes under $OUT; see
# benchmarks/GPU_RUN.md for the device-tool call and the rehearsal. Parts, each under its own `timeout`
# (SIGINT first, so pytest still prints its summary line; SIGKILL 15 s later), the run going on after a
# failure, all of them inside a budget of GPU_RUN_BUDGET seconds (default 380: the run ends well inside 7 min):
#
#   install        pip install the carried wheels (cffi, pycparser) into a target dir, put it on PYTHONPATH
#   env            nvidia-smi, driver, CUDA, CuPy, torch, compilers -> $OUT/env.txt
#   check          build the C kernels, one computation on stage2's and stage3's cuda devices
#   stage2_cuda    conformance --stage stage2_autograd --device CUDA on CuPy        } run side by side:
#   stage3_cuda    conformance --stage stage3_compiler --device CUDA -k SUBSET      } neither is timed
#   gemm_bench     benchmarks/test_gemm_cuda.py at n = 1024, 2048, 4096 -> $OUT/gemm_cuda.json
#   gemm_board     benchmarks.gemm_cuda_leaderboard on that JSON -> $OUT/gemm_cuda.md (+ .png in the tarball)
#   nanogpt_*      nanoGPT GPU-config step time: stage2 cuda, stage3 cuda (TinyJit), torch eager cuda,
#                  each in its own process; nanogpt_merge -> $OUT/nanogpt_gpu.json
#   on request only (--only): profile_stage2, profile_stage3, profile_torch (kernel and host profiles of
#                  a step), gemm_sweep (benchmarks/gemm_sweep.py), nanogpt_stage3_nolocal (stage3's step
#                  with PASSES=-local, to set beside nanogpt_stage3's), half_precision (stage2's bfloat16
#                  Tensor.matmul against cuBLAS's at n=4096, the nanoGPT step under bf16 autocast: stage2, torch)
#
# --smoke shrinks every part (GEMM n=64, a 2-layer toy GPT, 2 timed steps, pytest -x on a few dozen tests).
# SITP_CUDA_BACKEND=emulate runs the stages' cuda devices on the CPU emulator (common/cuda_emulation.py)
# instead of CuPy, and skips what needs a real GPU, saying so: that is the rehearsal without a GPU.
#
# The conformance suites run on pytest-xdist where it imports (the GPU image has it): GPU_RUN_WORKERS
# processes each (default: half the CPUs, at most 6; 0 or 1: none). PYTHON picks the interpreter
# (default python3). --only runs the named parts alone (the rest are listed as skipped), for a rerun.
# GPU_RUN_STEPS sets the timed nanoGPT steps (default 10); GPU_RUN_CONFORMANCE_CAP each conformance part's
# limit in seconds (default 170). Under --only the reserves for later parts are not held back.
#
# What comes back is at most 8 files (the device tool's limit): summary.txt, env.txt, stage2_cuda.log,
# stage3_cuda.log, gemm_cuda.json, gemm_cuda.md, nanogpt_gpu.json and logs.tar.gz (every part's log,
# the leaderboard's plot, per-implementation JSON, junit XML).
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD

SMOKE=0
ONLY=""
while [ "$#" -gt 0 ]; do
  case "$1" in
    --smoke) SMOKE=1 ;;
    --only) ONLY="$2"; shift ;;
    --only=*) ONLY="${1#--only=}" ;;
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) echo "gpu_run.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done

: "${OUT:?gpu_run.sh: set OUT to the folder the results go to (the device tool sets it)}"
mkdir -p "$OUT"
BACKEND=${SITP_CUDA_BACKEND:-cupy}
PY=${PYTHON:-python3}
BUDGET=${GPU_RUN_BUDGET:-380}
START=$(date +%s)
DEADLINE=$((START + BUDGET))
WORK=$(mktemp -d /tmp/gpu_run.XXXXXX)
SITE=$WORK/site
SUMMARY=$OUT/summary.txt
export PYTHONUNBUFFERED=1 SITP_CUDA_BACKEND=$BACKEND
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
unset CUPY_TF32 NVIDIA_TF32_OVERRIDE  # true FP32 for cuBLAS SGEMM (test_gemm_cuda.py refuses TF32)

if [ "$BACKEND" != emulate ] && nvidia-smi -L >/dev/null 2>&1; then HAVE_GPU=1; else HAVE_GPU=0; fi
if [ "$SMOKE" = 1 ]; then
  GEMM_SIZES=64
  # ~70 tests: GEMM rungs (matmul), elementwise (sigmoid), reductions (sum), the error contract
  SMOKE_K="CUDA-matmul-float32 or CUDA-sigmoid-float32-3x4 or CUDA-sum-float32-2x3x4 or (test_error and reshape)"
  PYTEST_SMOKE=(-x)
else
  GEMM_SIZES=1024,2048,4096
  PYTEST_SMOKE=()
fi

{
  echo "# gpu_run.sh$([ "$SMOKE" = 1 ] && echo " --smoke")${ONLY:+ --only $ONLY}: backend $BACKEND, GPU $([ "$HAVE_GPU" = 1 ] && echo yes || echo 'no (skipping what needs one)'), budget ${BUDGET}s, started $(date -u +%FT%TZ)"
  printf '%-15s %-9s %7s  %s\n' part status seconds 'pytest summary line / note'
} > "$SUMMARY"

record() {  # record NAME STATUS SECONDS NOTE
  printf '%-15s %-9s %7s  %s\n' "$1" "$2" "$3" "$4" >> "$SUMMARY"
  printf '<<< %-15s %-9s %7ss  %s\n' "$1" "$2" "$3" "$4"
}

skip() {  # skip NAME REASON
  record "$1" skipped 0.0 "$2"
}

wanted() { [ -z "$ONLY" ] || [[ ",$ONLY," == *",$1,"* ]]; }

pytest_line() {  # the pytest summary line of a log, '=' stripped
  grep -aE '([0-9]+ (passed|failed|errors?|skipped|deselected|xfailed|xpassed|warnings?)|no tests ran)[^a-z]*.* in [0-9.]+s' "$1" \
    | tail -1 | sed -E 's/^=+ //; s/ =+$//'
}

# part NAME CAP RESERVE LOG CMD...: run CMD (a program, or a function of this script) under `timeout` for
# CAP seconds, or less where the budget's end minus RESERVE comes first; its output goes to LOG and its
# line to summary.txt. RESERVE is the least the parts after it need, summed from these minimums: check 30,
# the conformance pair 60, gemm_bench 40, gemm_board 15, nanogpt_stage2 30, nanogpt_stage3 40,
# nanogpt_torch 20, nanogpt_merge 15. A part left under 15 s is skipped, saying so.
part() {
  local name=$1 cap=$2 reserve=$3 log=$4
  shift 4
  if ! wanted "$name"; then skip "$name" "skipped: not in --only"; return 0; fi
  # --only: the reserves, summed for the full run, would starve a short rerun (its install part was once
  # skipped "out of time" under a 260 s budget); each part's cap bounds it instead
  [ -n "$ONLY" ] && reserve=0
  local left=$((DEADLINE - $(date +%s) - reserve))
  local limit=$((cap < left ? cap : left))
  if [ "$limit" -lt 15 ]; then skip "$name" "skipped: out of time (budget ${BUDGET}s)"; return 0; fi
  echo ">>> $name (limit ${limit}s): $*"
  local t0 t1 rc note
  t0=$(date +%s.%N)
  if [ "$(type -t "$1")" = function ]; then
    timeout -s INT -k 15 "$limit" bash -c "$(declare -f "$1"); $*" > "$log" 2>&1
  else
    timeout -s INT -k 15 "$limit" "$@" > "$log" 2>&1
  fi
  rc=$?
  t1=$(date +%s.%N)
  note=$(pytest_line "$log")
  [ -n "$note" ] || note=$(grep -av '^\s*$' "$log" | tail -1 | cut -c1-200)
  if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then note="TIMEOUT after ${limit}s; $note"; fi
  record "$name" "exit=$rc" "$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')" "$note"
  return "$rc"
}
export BACKEND PY WORK SITE HAVE_GPU

# ---- 1. the carried wheels, the environment, a first computation on each cuda device ----

install_wheels() {
  if ! ls gpu_wheels/*.whl >/dev/null 2>&1; then
    if "$PY" -c 'import cffi' 2>/dev/null; then echo "no gpu_wheels/ carried; cffi is importable already"; return 0; fi
    echo "no gpu_wheels/ carried and no cffi: run benchmarks/gpu_wheels.sh here and name gpu_wheels in carry"
    return 1
  fi
  local pyver
  pyver=$("$PY" -c 'import sys; print(f"{sys.version_info[0]}{sys.version_info[1]}")')
  if ls gpu_wheels/*-cp3*.whl 2>/dev/null | grep -qv -- "-cp$pyver-"; then
    # A rehearsal on another Python: prove that the wheels install for the device's Python 3.12 (into a
    # scratch folder), and leave this Python on its own packages.
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$WORK/site-cp312" \
      --only-binary=:all: --python-version 3.12 --implementation cp --platform manylinux2014_x86_64 \
      --platform manylinux_2_17_x86_64 --platform manylinux_2_28_x86_64 gpu_wheels/*.whl || return 1
    ls "$WORK/site-cp312"
    echo "python here is cp$pyver, the wheels cp312: installed into a scratch folder to prove them, not used"
    return 0
  fi
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$SITE" gpu_wheels/*.whl || return 1
  ls "$SITE"
  PYTHONPATH="$PYTHONPATH:$SITE" "$PY" -c 'import cffi; print("installed: cffi", cffi.__version__, "in", cffi.__file__)'
}
part install 60 250 "$WORK/install.log" install_wheels
[ -d "$SITE" ] && export PYTHONPATH="$PYTHONPATH:$SITE"

env_report() {
  echo "== $(date -u +%FT%TZ); host $(hostname); $(nproc) CPUs; kernel $(uname -r); commit $(git rev-parse HEAD 2>/dev/null || echo 'unknown (no .git)')"
  if [ "$HAVE_GPU" = 1 ]; then
    echo "== nvidia-smi"
    nvidia-smi
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,power.limit --format=csv
  else
    echo "== nvidia-smi: skipped: no GPU (backend $BACKEND)"
  fi
  echo "== versions"
  "$PY" benchmarks/gpu_run.py env
  echo "== install log"
  cat "$WORK/install.log" 2>/dev/null
  if [ "$HAVE_GPU" = 1 ]; then
    echo "GPU: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | head -1)"
  else
    echo "no GPU: nvidia-smi, CUDA and torch-cuda skipped (backend $BACKEND)"
  fi
}
part env 30 250 "$OUT/env.txt" env_report
part check 90 220 "$WORK/check.log" "$PY" benchmarks/gpu_run.py check

# ---- 2 and 5. the conformance suites on the cuda devices, side by side (neither is a timing) ----

SUBSET=$("$PY" benchmarks/gpu_run.py subset 2>"$WORK/subset.err")
if [ "$SMOKE" = 1 ]; then
  K2=(-k "$SMOKE_K")
  K3=(-k "($SUBSET) and ($SMOKE_K)")
else
  K2=()
  K3=(-k "$SUBSET")
fi
PYTEST=("$PY" -m pytest -q -p no:cacheprovider -rfE "${PYTEST_SMOKE[@]}")
# pytest-xdist (the GPU image has it): each suite on WORKERS processes, the two suites side by side. A fresh
# machine compiles every kernel with NVRTC on first use (stage3's subset: thousands), work for many CPUs.
# stage3's subset took 130 s beside stage2 on the first H100 run (2026-11-27) and was cut in its teardown.
CONF_CAP=${GPU_RUN_CONFORMANCE_CAP:-170}
WORKERS=${GPU_RUN_WORKERS:-$(( $(nproc) / 2 > 6 ? 6 : $(nproc) / 2 ))}
XDIST=()
if [ "$WORKERS" -ge 2 ] && "$PY" -c 'import xdist' 2>/dev/null; then XDIST=(-n "$WORKERS"); fi
part stage2_cuda "$CONF_CAP" 160 "$OUT/stage2_cuda.log" "${PYTEST[@]}" "${XDIST[@]}" conformance --stage stage2_autograd \
  --device CUDA "${K2[@]}" --junitxml "$WORK/stage2_cuda.xml" &
if [ -n "$SUBSET" ]; then
  part stage3_cuda "$CONF_CAP" 160 "$OUT/stage3_cuda.log" "${PYTEST[@]}" "${XDIST[@]}" conformance --stage stage3_compiler \
    --device CUDA "${K3[@]}" --junitxml "$WORK/stage3_cuda.xml" &
else
  record stage3_cuda failed 0.0 "could not read STAGE3_CUDA_SUBSET from noxfile.py: $(tail -1 "$WORK/subset.err")"
fi
wait

# ---- 3. the CUDA GEMM ladder against cuBLAS (nox -s gemm_cuda without nox) ----

GEMM_CMD=(env SITP_GEMM_SIZES="$GEMM_SIZES" "${PYTEST[@]}" benchmarks/test_gemm_cuda.py
          --benchmark-json "$WORK/gemm_cuda.json")
if [ "$HAVE_GPU" = 1 ]; then
  part gemm_bench 90 120 "$WORK/gemm_bench.log" "${GEMM_CMD[@]}"
  [ -f "$WORK/gemm_cuda.json" ] && cp "$WORK/gemm_cuda.json" "$OUT/"
  # no --write-headers: the .cu files here are a copy; GPU_RUN.md says how to apply them from the JSON
  part gemm_board 30 105 "$WORK/gemm_board.log" "$PY" -m benchmarks.gemm_cuda_leaderboard "$WORK/gemm_cuda.json"
  [ -f "$WORK/gemm_cuda.md" ] && cp "$WORK/gemm_cuda.md" "$OUT/"
elif wanted gemm_bench; then
  # no GPU: the suite skips itself; run its command anyway, to prove the command line
  timeout -s INT -k 5 60 "${GEMM_CMD[@]}" > "$WORK/gemm_bench.log" 2>&1
  skip gemm_bench "skipped: no GPU (CuPy, cuBLAS); the command ran: exit $? (5: nothing collected), $(pytest_line "$WORK/gemm_bench.log")"
  skip gemm_board "skipped: no GPU (no benchmarks to render)"
else
  skip gemm_bench "skipped: not in --only"
  skip gemm_board "skipped: not in --only"
fi

# ---- 4. nanoGPT's GPU config: step time on stage2 cuda, stage3 cuda (jitted), torch eager cuda ----

NANO=("$PY" benchmarks/gpu_run.py nanogpt)
[ "$SMOKE" = 1 ] && NANO+=(--smoke)
[ -n "${GPU_RUN_STEPS:-}" ] && NANO+=(--steps "$GPU_RUN_STEPS")
part nanogpt_stage2 60 75 "$WORK/nanogpt_stage2.log" "${NANO[@]}" --impl stage2 --json "$WORK/nanogpt_stage2.json"
part nanogpt_stage3 90 35 "$WORK/nanogpt_stage3.log" "${NANO[@]}" --impl stage3 --json "$WORK/nanogpt_stage3.json"
if [ "$HAVE_GPU" = 1 ]; then
  part nanogpt_torch 40 15 "$WORK/nanogpt_torch.log" "${NANO[@]}" --impl torch --json "$WORK/nanogpt_torch.json"
elif wanted nanogpt_torch; then
  # no GPU: the torch code path on torch's CPU, kept out of the merged JSON (its times mean nothing here)
  timeout -s INT -k 5 60 "${NANO[@]}" --impl torch --torch-cpu --json "$WORK/nanogpt_torch_cpu.json" \
    > "$WORK/nanogpt_torch_cpu.log" 2>&1
  skip nanogpt_torch "skipped: no GPU (torch eager on CUDA); its code path on torch's CPU: exit $?, $(tail -1 "$WORK/nanogpt_torch_cpu.log" | cut -c1-120)"
else
  skip nanogpt_torch "skipped: not in --only"
fi
if wanted nanogpt_stage2 || wanted nanogpt_stage3 || wanted nanogpt_torch; then
  ONLY="" part nanogpt_merge 15 0 "$WORK/nanogpt_merge.log" "$PY" benchmarks/gpu_run.py merge \
    --json "$OUT/nanogpt_gpu.json" "$WORK"/nanogpt_stage2.json "$WORK"/nanogpt_stage3.json "$WORK"/nanogpt_torch.json
fi

# ---- on request only (--only profile_stage2,...): where a nanoGPT step's time goes, kernels and host ----

for impl in stage2 stage3 torch; do
  if [ -n "$ONLY" ] && wanted "profile_$impl"; then
    PROFILE=("$PY" benchmarks/gpu_run.py profile --impl "$impl")
    [ "$SMOKE" = 1 ] && PROFILE+=(--smoke)
    part "profile_$impl" 90 0 "$WORK/profile_$impl.log" "${PROFILE[@]}"
  fi
done

# ---- on request only (--only nanogpt_stage3_nolocal): stage3's step without LOCAL's shared-memory matmuls ----

if [ -n "$ONLY" ] && wanted nanogpt_stage3_nolocal; then
  part nanogpt_stage3_nolocal 90 0 "$WORK/nanogpt_stage3_nolocal.log" env PASSES=-local "${NANO[@]}" --impl stage3 \
    --json "$WORK/nanogpt_stage3_nolocal.json"
fi

# ---- on request only (--only gemm_sweep): rung 08's tile shapes, stage2's matmuls against torch ----

if [ -n "$ONLY" ] && wanted gemm_sweep; then
  part gemm_sweep 150 0 "$WORK/gemm_sweep.log" "$PY" benchmarks/gemm_sweep.py --json "$WORK/gemm_sweep.json"
  tail -n 40 "$WORK/gemm_sweep.log"  # the tables, into the reply
fi

# ---- on request only (--only half_precision): bfloat16 from the API, the tensor cores through Tensor ----
# stage2's bf16 Tensor.matmul against torch's (cuBLAS) at n=4096, and the nanoGPT step under bf16 autocast,
# stage2 and torch (stage3's cuda renderer does not take the half types yet); JSONs in the tarball.

if [ -n "$ONLY" ] && wanted half_precision; then
  MATMUL=("$PY" benchmarks/gpu_run.py matmul --n "$([ "$SMOKE" = 1 ] && echo 64 || echo 4096)")
  ONLY="" part matmul_bf16_stage2 40 0 "$WORK/matmul_bf16_stage2.log" "${MATMUL[@]}" --impl stage2 \
    --json "$WORK/matmul_bf16_stage2.json"
  ONLY="" part matmul_bf16_torch 30 0 "$WORK/matmul_bf16_torch.log" "${MATMUL[@]}" --impl torch \
    --json "$WORK/matmul_bf16_torch.json"
  ONLY="" part nanogpt_bf16_stage2 60 0 "$WORK/nanogpt_bf16_stage2.log" "${NANO[@]}" --impl stage2 --precision bf16 \
    --json "$WORK/nanogpt_bf16_stage2.json"
  ONLY="" part nanogpt_bf16_torch 40 0 "$WORK/nanogpt_bf16_torch.log" "${NANO[@]}" --impl torch --precision bf16 \
    --json "$WORK/nanogpt_bf16_torch.json"
  tail -n 1 "$WORK"/matmul_bf16_*.log "$WORK"/nanogpt_bf16_*.log  # the figures, into the reply
fi

# ---- what comes back: at most 8 files ----

echo "# done in $(($(date +%s) - START))s of a ${BUDGET}s budget" >> "$SUMMARY"
cp "$SUMMARY" "$WORK/"
tar -czf "$OUT/logs.tar.gz" -C "$WORK" --exclude=./site --exclude=./site-cp312 . 2>/dev/null && rm -rf "$WORK"
files=$(find "$OUT" -type f | wc -l)
[ "$files" -le 8 ] || echo "gpu_run.sh: $files files under \$OUT, more than the 8 that come back" | tee -a "$SUMMARY"
echo
cat "$SUMMARY"
