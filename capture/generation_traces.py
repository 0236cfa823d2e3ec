"""Generation-loop test traces: loops with no ``ProfilerStep`` and no annotation, as users record them.

Run on a CUDA host (``python -m capture.generation_traces OUT_DIR``; ``--device cpu`` runs the same
code on the CPU to check it); writes gzipped Kineto traces into ``OUT_DIR`` and a ``generation.json``
manifest with what each one is and its ground truth (every forward of the model, counted by a hook,
with its input's sequence length):

- ``hf_generate``: Hugging Face ``transformers``' ``LlamaForCausalLM`` built here from a small
  ``LlamaConfig`` (random weights, no download), ``model.generate`` of 32 new tokens (1 prefill + 31
  decode forwards) with its default dynamic cache, greedy; no ``record_function``, no schedule;
- ``hf_generate_static-compile``: the same ``generate`` with ``cache_implementation="static"``, with
  which ``transformers`` compiles the decode forward itself (``torch.compile``, mode
  ``"reduce-overhead"``: CUDA graphs), compiled and its graphs recorded by calls before the window;
- ``decode_plain``: the hand-written decode loop of :mod:`capture.graph_traces` (prefill + 16 decode
  forwards of a tiny Llama-like model with a static KV cache) with no ``record_function`` at all.

Profiler: CPU + CUDA, ``record_shapes=True``, no schedule (the whole loop is the window).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import time

import torch
from torch.profiler import ProfilerActivity, profile

from capture import header

NEW_TOKENS = 32
BATCH, PROMPT = 4, 8


def _export(prof, out: str, name: str) -> str:
    raw = os.path.join(out, name + ".json")
    prof.export_chrome_trace(raw)
    path = raw + ".gz"
    with open(raw, "rb") as fin, gzip.GzipFile(path, "wb", 9, mtime=0) as fout:
        fout.write(header.neutralise(fin.read(), os.path.basename(path)))
    os.remove(raw)
    return os.path.basename(path)


def _sync(dev: str) -> None:
    if dev == "cuda":
        torch.cuda.synchronize()


def _profiled(out: str, name: str, dev: str, body) -> str:
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if dev == "cuda" else [])
    _sync(dev)
    with profile(activities=acts, record_shapes=True) as prof:
        body()
        _sync(dev)
    return _export(prof, out, name)


class _Forwards:
    """Counts a module's forward calls and the sequence length of each call's ``input_ids``."""

    def __init__(self, module) -> None:
        self.seq: list[int] = []
        self.handle = module.register_forward_pre_hook(self._pre, with_kwargs=True)

    def _pre(self, module, args, kwargs):
        ids = kwargs.get("input_ids", args[0] if args else None)
        self.seq.append(int(ids.shape[1]) if ids is not None else -1)

    def take(self) -> list[int]:
        seq, self.seq = self.seq, []
        return seq


def _llama(dev: str):
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(vocab_size=2048, hidden_size=256, intermediate_size=1024, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=256,
                      bos_token_id=1, eos_token_id=2, pad_token_id=0)
    torch.manual_seed(0)
    dtype = torch.bfloat16 if dev == "cuda" else torch.float32
    return LlamaForCausalLM(cfg).to(dev, dtype).eval()


def _generate_args(dev: str, **extra) -> dict:
    torch.manual_seed(1)
    ids = torch.randint(3, 2048, (BATCH, PROMPT), device=dev)
    # min_new_tokens = max_new_tokens: every run makes exactly NEW_TOKENS forwards (no early stop)
    return dict(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=NEW_TOKENS,
                min_new_tokens=NEW_TOKENS, do_sample=False, pad_token_id=0, **extra)


def _unique_graphs() -> int:
    try:
        from torch._dynamo.utils import counters
        return int(counters["stats"]["unique_graphs"])
    except Exception:  # older torch: not counted
        return -1


def hf_traces(out: str, dev: str, notes: dict) -> None:
    import transformers

    notes["transformers"] = transformers.__version__
    model = _llama(dev)
    seen = _Forwards(model)
    with torch.no_grad():
        model.generate(**_generate_args(dev))  # warm-up: cuBLAS handles, allocator, kernels' first loads
        seen.take()
        t0 = time.perf_counter()
        name = _profiled(out, "hf_generate", dev, lambda: model.generate(**_generate_args(dev)))
        notes["hf_generate"] = {
            "trace_file": name, "forwards": len(seq := seen.take()), "seq_lens": seq,
            "seconds": round(time.perf_counter() - t0, 3),
            "what": f"transformers LlamaForCausalLM (2 layers, hidden 256, 4 heads, vocab 2048, random weights), "
                    f"generate of {NEW_TOKENS} tokens for a batch of {BATCH} prompts of {PROMPT} tokens, greedy, "
                    "dynamic cache; no record_function, no schedule"}

    if dev != "cuda":
        return
    # Hugging Face compiles the decode forward itself (mode "reduce-overhead") when the cache is static
    # on a GPU; the prefill stays eager. A forward hook would be traced into the compiled call, so the
    # forwards of this run are counted from the tokens generate returns instead.
    seen.handle.remove()
    torch._dynamo.reset()
    args = dict(cache_implementation="static")
    with torch.no_grad():
        graphs_before = _unique_graphs()
        for _ in range(3):  # compile the decode forward, then the cudagraph trees' warm-up and record
            model.generate(**_generate_args(dev, **args))
        graphs_warm = _unique_graphs()
        result: list = []
        name = _profiled(out, "hf_generate_static-compile", dev,
                         lambda: result.append(model.generate(**_generate_args(dev, **args))))
        notes["hf_generate_static-compile"] = {
            "trace_file": name, "new_tokens": int(result[0].shape[1]) - PROMPT,
            "dynamo_graphs_compiled_before_window": graphs_warm - graphs_before,
            "dynamo_graphs_compiled_in_window": _unique_graphs() - graphs_warm,
            "what": "the same generate with cache_implementation='static': transformers compiles the decode "
                    "forward with torch.compile (its CompileConfig default, mode 'reduce-overhead'), the prefill "
                    "stays eager; three generate calls before the window compiled it and recorded its CUDA graphs"}


def plain_decode_trace(out: str, dev: str, notes: dict, steps: int = 16) -> None:
    from capture.graph_traces import TinyLlama

    torch.manual_seed(0)
    dtype = torch.bfloat16 if dev == "cuda" else torch.float32
    model = TinyLlama().to(dev, dtype).eval()
    seen = _Forwards(model)
    tokens = torch.randint(0, 2048, (BATCH, PROMPT), device=dev)
    step_tok = torch.randint(0, 2048, (BATCH, 1), device=dev)
    step_pos = torch.zeros(1, dtype=torch.long, device=dev)

    def loop():
        with torch.no_grad():
            model(tokens, torch.arange(PROMPT, device=dev))
            for i in range(steps):
                step_pos.fill_(PROMPT + i)
                model(step_tok, step_pos)

    loop()  # warm-up
    seen.take()
    name = _profiled(out, "decode_plain", dev, loop)
    notes["decode_plain"] = {
        "trace_file": name, "forwards": len(seq := seen.take()), "seq_lens": seq,
        "what": f"the tiny Llama-like decoder of graph_traces (2 layers, dim 256, batch {BATCH}, static KV cache), "
                f"prefill of {PROMPT} tokens + {steps} decode forwards, eager, no record_function"}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("out", nargs="?", default="generation_traces")
    parser.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    opts = parser.parse_args(argv)
    os.makedirs(opts.out, exist_ok=True)
    notes: dict = {"schema": "tracekit.generation-traces/1", "torch": torch.__version__,
                   "device": torch.cuda.get_device_name() if opts.device == "cuda" else "cpu"}
    t0 = time.time()
    for part in (plain_decode_trace, hf_traces):
        try:
            part(opts.out, opts.device, notes)
        except Exception as err:  # one part failing must not lose the others' traces
            notes[part.__name__ + "_error"] = f"{type(err).__name__}: {err}"[:800]
    notes["seconds"] = round(time.time() - t0, 1)
    with open(os.path.join(opts.out, "generation.json"), "w") as fh:
        json.dump(notes, fh, indent=1, sort_keys=True)
    print(json.dumps(notes, indent=1))


if __name__ == "__main__":
    main()
