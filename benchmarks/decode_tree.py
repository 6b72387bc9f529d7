"""nanochat's KV-cache decode speed of one tree, for back-to-back comparisons of two trees: run it from
each tree's root as `PYTHONPATH=. python <this file> STAGE` (an older tree's engine bench has no
--cached-only). Depth 4, random weights, a 16-token prompt, 256 greedy tokens, timed after a warm-up
that compiles the prefill and decode kernels of the timed cache's size; prints tok/s and the first
tokens (equal across trees and stages when both decode the same model)."""

import sys
import time

import numpy as np

from common.chat.engine import greedy_cached
from common.models.nanochat import NanoChat, NanoChatConfig, random_state
from common.stages import load_stage
from common.train.checkpoint import load_model_weights

stage = load_stage(int(sys.argv[1]))
T = stage.Tensor
config = NanoChatConfig.from_depth(4, vocab_size=4096, sequence_len=16 + 256)
model = NanoChat(stage, config)
load_model_weights(stage, model, random_state(config, 0))
prompt = np.random.default_rng(0).integers(0, 4096, 16).tolist()
greedy_cached(model, T, prompt, 4)
greedy_cached(model, T, prompt, 256)  # the 272-row cache's kernels, compiled before the timed run
t0 = time.perf_counter()
out = greedy_cached(model, T, prompt, 256)
print(f"{stage.__name__}: {256 / (time.perf_counter() - t0):.1f} tok/s, first tokens {out[:5]}")
