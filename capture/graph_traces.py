"""CUDA-graph test traces: graphs captured and replayed inside the profiled window, and their eager twins.

Run on a CUDA host (``python -m capture.graph_traces OUT_DIR [PART ...]``, parts: mlp, decode, multishape); writes gzipped Kineto traces into
``OUT_DIR`` and a ``graphs.json`` manifest saying what each one is:

- ``mlp_graph-capture``: the eager GeGLU MLP (bf16, x [64, 128, 768], hidden 3072) captured with
  ``torch.cuda.graph`` inside the window (``capture#0``), then replayed four times (``replay#N``);
- ``mlp_graph-eager``: the same MLP run eagerly four times (the capture's companion);
- ``decode_eager``: a tiny Llama-like model built here (no download) with a static KV cache: one
  prefill and 16 decode forwards (``prefill#0``, ``decode#N``), no CUDA graph;
- ``decode_graphs``: the same loop with the decode step captured once inside the window and
  replayed; with ``enable_annotations=True`` and ``mark_kernels`` scopes when this torch has them;
- ``decode_reduce-overhead``: the decode step under ``torch.compile(mode="reduce-overhead")``,
  compiled before the window, its CUDA-graph record and replays inside it;
- ``multishape_capture`` / ``multishape_replay``: a capture phase as serving engines record it — the
  same two functions (a pointwise ``gelu(x) * x + 1`` and the MLP) warmed up and captured once per
  batch size (``capture#<fn>-<rows>``), then, in a second trace, only the graphs of one batch size
  replayed (``replay#N``): whose kernels bear the same names at every size.

Every step is a ``record_function`` span (no profiler schedule: a schedule drops a capture's events).
"""

from __future__ import annotations

import gzip
import inspect
import json
import os
import sys
import time

import torch
from torch import nn
from torch.profiler import ProfilerActivity, profile, record_function

from capture import header

DEV = "cuda"
DT = torch.bfloat16


class Mlp(nn.Module):
    def __init__(self, dim: int = 768, hidden: int = 3072) -> None:
        super().__init__()
        self.gate = nn.Linear(dim, hidden, bias=False)
        self.up = nn.Linear(dim, hidden, bias=False)
        self.down = nn.Linear(hidden, dim, bias=False)

    def forward(self, x):
        return self.down(nn.functional.gelu(self.gate(x), approximate="tanh") * self.up(x))


class Block(nn.Module):
    def __init__(self, dim: int, heads: int, max_len: int, batch: int) -> None:
        super().__init__()
        self.heads, self.hd = heads, dim // heads
        self.norm1, self.norm2 = nn.RMSNorm(dim), nn.RMSNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim, bias=False)
        self.o = nn.Linear(dim, dim, bias=False)
        self.mlp = Mlp(dim, 4 * dim)
        self.register_buffer("k", torch.zeros(batch, heads, max_len, self.hd))
        self.register_buffer("v", torch.zeros(batch, heads, max_len, self.hd))

    def forward(self, x, pos, mask):
        b, s, d = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(b, s, 3, self.heads, self.hd).permute(2, 0, 3, 1, 4)
        self.k.index_copy_(2, pos, k)
        self.v.index_copy_(2, pos, v)
        a = nn.functional.scaled_dot_product_attention(q, self.k, self.v, attn_mask=mask)
        x = x + self.o(a.transpose(1, 2).reshape(b, s, d))
        return x + self.mlp(self.norm2(x))


class TinyLlama(nn.Module):
    def __init__(self, vocab=2048, dim=256, heads=4, layers=2, max_len=64, batch=4) -> None:
        super().__init__()
        self.max_len = max_len
        self.emb = nn.Embedding(vocab, dim)
        self.blocks = nn.ModuleList(Block(dim, heads, max_len, batch) for _ in range(layers))
        self.norm = nn.RMSNorm(dim)
        self.head = nn.Linear(dim, vocab, bias=False)

    def forward(self, tokens, pos):
        mask = torch.arange(self.max_len, device=tokens.device)[None, :] <= pos[:, None]
        x = self.emb(tokens)
        for blk in self.blocks:
            x = blk(x, pos, mask)
        return self.head(self.norm(x))


def _profiled(out: str, name: str, body) -> None:
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], record_shapes=True) as prof:
        body()
        torch.cuda.synchronize()
    raw = os.path.join(out, name + ".json")
    prof.export_chrome_trace(raw)
    with open(raw, "rb") as fin, gzip.GzipFile(os.path.join(out, name + ".json.gz"), "wb", 9, mtime=0) as fout:
        fout.write(header.neutralise(fin.read(), name + ".json.gz"))
    os.remove(raw)


def mlp_traces(out: str, notes: dict) -> None:
    torch.manual_seed(0)
    mlp = Mlp().to(DEV, DT)
    x = torch.randn(64, 128, 768, device=DEV, dtype=DT)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up on a side stream, as torch.cuda.graph's docs ask
        for _ in range(3):
            mlp(x)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()

    def captured():
        with record_function("capture#0"):
            with torch.cuda.graph(graph):
                mlp(x)
        for i in range(4):
            with record_function(f"replay#{i}"):
                graph.replay()

    def eager():
        for i in range(4):
            with record_function(f"step#{i}"):
                mlp(x)

    _profiled(out, "mlp_graph-capture", captured)
    _profiled(out, "mlp_graph-eager", eager)
    notes["mlp_graph-capture"] = "eager GeGLU MLP captured with torch.cuda.graph in the window, 4 replays"
    notes["mlp_graph-eager"] = "the same MLP eagerly, 4 steps: companion of mlp_graph-capture"


def _annotations_supported() -> bool:
    return "enable_annotations" in inspect.signature(torch.cuda.graph).parameters


def decode_traces(out: str, notes: dict, steps: int = 16) -> None:
    torch.manual_seed(0)
    model = TinyLlama().to(DEV, DT).eval()
    batch, prompt = 4, 8
    tokens = torch.randint(0, 2048, (batch, prompt), device=DEV)
    step_tok = torch.randint(0, 2048, (batch, 1), device=DEV)
    step_pos = torch.zeros(1, dtype=torch.long, device=DEV)

    def prefill():
        with record_function("prefill#0"):
            model(tokens, torch.arange(prompt, device=DEV))

    def decode_step():
        return model(step_tok, step_pos)

    def eager():
        with torch.no_grad():
            prefill()
            for i in range(steps):
                step_pos.fill_(prompt + i)
                with record_function(f"decode#{i}"):
                    decode_step()

    _profiled(out, "decode_eager", eager)
    notes["decode_eager"] = f"tiny Llama (2 layers, dim 256, batch 4), prefill of {prompt} + {steps} decode forwards, eager"

    annotate = _annotations_supported()
    graph = torch.cuda.CUDAGraph()
    with torch.no_grad():
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(2):
                decode_step()
        torch.cuda.current_stream().wait_stream(side)

    def graphed():
        with torch.no_grad():
            prefill()
            with record_function("capture#0"):
                if annotate:
                    from torch.cuda._graph_annotations import mark_kernels
                    scopes = []

                    def enter(m, a, n):
                        scopes.append(mark_kernels({"name": f"layer {n}"}))
                        scopes[-1].__enter__()

                    hooks = [h for n, blk in enumerate(model.blocks) for h in (
                        blk.register_forward_pre_hook(lambda m, a, n=n: enter(m, a, n)),
                        blk.register_forward_hook(lambda m, a, r: scopes.pop().__exit__(None, None, None)))]
                    with torch.cuda.graph(graph, enable_annotations=True):
                        with mark_kernels("decode_step"):
                            decode_step()
                    for h in hooks:
                        h.remove()
                else:
                    with torch.cuda.graph(graph):
                        decode_step()
            for i in range(steps):
                step_pos.fill_(prompt + i)
                with record_function(f"decode#{i}"):
                    graph.replay()

    _profiled(out, "decode_graphs", graphed)
    notes["decode_graphs"] = (f"the same loop, decode step captured once in the window and replayed {steps} times; "
                              f"annotations: {'enable_annotations=True' if annotate else 'not in this torch'}")
    if annotate:
        from torch.cuda._graph_annotations import get_kernel_annotations
        with open(os.path.join(out, "decode_graphs.annotations.json"), "w") as fh:
            json.dump({str(k): v for k, v in get_kernel_annotations().items()}, fh, default=str)

    torch._dynamo.reset()
    compiled = torch.compile(decode_step, mode="reduce-overhead")
    with torch.no_grad():
        step_pos.fill_(prompt)
        compiled()  # compile and the cudagraph tree's warm-up run, before the window

        def reduce_overhead():
            for i in range(steps):
                step_pos.fill_(prompt + i)
                with record_function(f"decode#{i}"):
                    compiled()

        _profiled(out, "decode_reduce-overhead", reduce_overhead)
    notes["decode_reduce-overhead"] = (f"decode step under torch.compile(mode='reduce-overhead'), compiled and warmed "
                                       f"before the window; graph record and {steps} calls inside it")


MULTISHAPE_ROWS = (1024, 2048, 4096)
MULTISHAPE_REPLAYED = 2048


def _pointwise(x):
    return nn.functional.gelu(x, approximate="tanh") * x + 1


def multishape_traces(out: str, notes: dict) -> None:
    torch.manual_seed(0)
    mlp = Mlp().to(DEV, DT)
    graphs: dict = {}  # (fn, rows) -> (graph, its static input, its output): all kept alive for replay

    def capture_phase():
        for rows in MULTISHAPE_ROWS:
            for fname, fn, x in (("pointwise", _pointwise, torch.randn(rows, 3072, device=DEV, dtype=DT)),
                                 ("mlp", mlp, torch.randn(rows, 768, device=DEV, dtype=DT))):
                side = torch.cuda.Stream()
                side.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(side):  # warm-up before capture, as torch.cuda.graph's docs ask
                    for _ in range(2):
                        fn(x)
                torch.cuda.current_stream().wait_stream(side)
                graph = torch.cuda.CUDAGraph()
                with record_function(f"capture#{fname}-{rows}"):
                    with torch.cuda.graph(graph):
                        y = fn(x)
                graphs[(fname, rows)] = (graph, x, y)
        torch.cuda.synchronize()

    def replay_phase():
        for i in range(4):
            with record_function(f"replay#{i}"):
                graphs[("pointwise", MULTISHAPE_REPLAYED)][0].replay()
                graphs[("mlp", MULTISHAPE_REPLAYED)][0].replay()

    with torch.no_grad():
        _profiled(out, "multishape_capture", capture_phase)
        _profiled(out, "multishape_replay", replay_phase)
    notes["multishape_capture"] = (f"capture phase: pointwise gelu(x)*x+1 on [rows, 3072] and the GeGLU MLP on "
                                   f"[rows, 768], each warmed up twice on a side stream and captured, for rows in "
                                   f"{list(MULTISHAPE_ROWS)} (bf16)")
    notes["multishape_replay"] = (f"only the rows={MULTISHAPE_REPLAYED} graphs of multishape_capture replayed 4 times "
                                  f"(pointwise then MLP); companion: multishape_capture")


#: ``python -m capture.graph_traces OUT [PART ...]`` records only the named parts (default: all).
PARTS = {"mlp": mlp_traces, "decode": decode_traces, "multishape": multishape_traces}


def main(out: str, parts: list[str] | None = None) -> None:
    os.makedirs(out, exist_ok=True)
    notes: dict = {"torch": torch.__version__, "device": torch.cuda.get_device_name(),
                   "annotations_supported": _annotations_supported()}
    t0 = time.time()
    for part in [PARTS[p] for p in (parts or PARTS)]:
        try:
            part(out, notes)
        except Exception as err:  # one part failing must not lose the others' traces
            notes[part.__name__ + "_error"] = f"{type(err).__name__}: {err}"[:500]
    notes["seconds"] = round(time.time() - t0, 1)
    with open(os.path.join(out, "graphs.json"), "w") as fh:
        json.dump(notes, fh, indent=1, sort_keys=True)
    print(json.dumps(notes, indent=1))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "graph_traces", sys.argv[2:] or None)
