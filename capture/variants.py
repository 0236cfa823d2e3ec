"""The workloads ``tracekit capture`` records: models, inputs and one-step functions per variant/mode.

Contract: :func:`plan` turns the selected variants/modes into :class:`Spec` s (cheap, nothing built);
``spec.build(opts)`` builds one :class:`Case` (allocates, compiles lazily) whose ``step()`` runs one
profiled step and whose ``check()`` compares its output with the eager and float64 references on
fresh random inputs. A Case may instead bring its own profiled loop (``drive``, run with no profiler
schedule), its own schedule, checks after the trace and facts read after it (``after_trace``). Names
are an interface: trace files are ``<variant>_<mode>.json.gz``.

============  ==========================================  ==============  ==============
variant       modes                                       label           default shapes
============  ==========================================  ==============  ==============
matmul_add    eager-<N>, compile-<N> for N in --sizes      matmul_add      N = 64, 4096
linear        eager, compile                               linear_fwd      [1024, 32] -> 64
mlp           eager, compile, compile-cudagraphs, liger    mlp_fwd         64 x 128, 768 -> 3072
train         eager (bf16 autocast on CUDA)                train_step      GPT-2 small, 8 x 512
antipatterns  one per planted problem + controls           train_step      4096 x 1024 -> 4096, 4 blocks
              (capture/antipatterns.py)
============  ==========================================  ==============  ==============

``ranks`` (:data:`PROCESS_VARIANTS`) is no entry of this catalogue: several processes record it
together, one trace per rank (capture/ranks.py).

``--from-first-call`` turns ``mlp`` into the shape sweep of capture/sweep.py: modes eager-sweep,
compile-sweep, compile-static-sweep, compile-dynamic-sweep, compile-cudagraphs-sweep, liger-sweep.
``--profile-memory`` appends ``-memory`` to every mode (``mlp_eager-memory``), so traces with
``[memory]`` events never share a name with traces without.

torch is imported inside functions only, so that importing this module stays cheap.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from capture import antipatterns, sweep
from capture.record import Schedule

ANTIPATTERNS = antipatterns.BY_MODE

VARIANTS = ("matmul_add", "linear", "mlp", "train", "antipatterns")
#: Variants recorded by several processes at once rather than by the one-process capture loop
#: (session.py): ``ranks``, one trace per rank of a gloo DDP loop on the CPU (capture/ranks.py).
PROCESS_VARIANTS = ("ranks",)
# What ``--variant all`` records: the study's workloads (the command that made sample_traces/); the
# antipattern loops are asked for by name.
STUDY_VARIANTS = ("matmul_add", "linear", "mlp", "train")
MODE_KINDS = {
    "matmul_add": ("eager", "compile"),
    "linear": ("eager", "compile"),
    "mlp": ("eager", "compile", "compile-cudagraphs", "liger"),
    "train": ("eager",),
    "antipatterns": antipatterns.MODES,
}
SWEEP_KINDS = tuple(sweep.SWEEP_MODES)  # mlp's modes with --from-first-call
FIRST_CALL_VARIANTS = ("mlp",)
MEMORY_SUFFIX = "-memory"
LABELS = {"matmul_add": "matmul_add", "linear": "linear_fwd", "mlp": "mlp_fwd", "train": "train_step",
          "antipatterns": "train_step"}
NEEDS_CUDA = {"compile-cudagraphs", "liger"}
LIGER_REPO = "kernels-community/liger-kernels"
LIGER_VERSION = 1
DTYPES = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}


@dataclass(frozen=True)
class Options:
    device: str = "cuda"
    dtype: str = "bf16"
    sizes: tuple[int, ...] = (64, 4096)
    linear_shape: tuple[int, int, int] = (1024, 32, 64)  # batch, in, out
    mlp_shape: tuple[int, int, int, int] = (64, 128, 768, 3072)  # batch, seq, dim, hidden
    train_shape: tuple[int, int] = (8, 512)  # batch, seq
    train_model: tuple[int, int, int, int] = (12, 768, 12, 50304)  # layers, dim, heads, vocab (GPT-2 small)
    antipattern_shape: tuple[int, int, int, int] = antipatterns.DEFAULT_SHAPE  # batch, dim, hidden, blocks
    kernel_repo: str | None = None
    seed: int = 0
    schedule: Schedule = Schedule()
    from_first_call: bool = False  # mlp: the shape sweep profiled from its first call (capture/sweep.py)
    sweep_shapes: tuple[tuple[int, int], ...] | None = None  # (batch, seq) per shape; None: mlp_shape's
    calls_per_shape: int = sweep.DEFAULT_CALLS_PER_SHAPE
    profile_memory: bool = False


@dataclass
class Case:
    variant: str
    mode: str
    label: str
    dtype: str
    shapes: dict[str, Any]
    step: Callable[[], Any]
    check: Callable[[], dict[str, Any]] | None = None
    notes: dict[str, Any] = field(default_factory=dict)
    warmup_calls: int = 5
    bench_rep_ms: float = 200.0
    # Optional: the case's own profiled loop ``drive(prof, probe)``, run with no profiler schedule.
    drive: Callable[[Any, Any], None] | None = None
    schedule: Schedule | None = None  # overrides the command's schedule for the step loop
    sync_each_step: bool = True
    check_after_trace: bool = False
    after_trace: Callable[[], dict[str, Any]] | None = None  # manifest fields read after the trace
    bench: bool = True
    context: Callable[[], AbstractContextManager[Any]] = nullcontext  # held around warm-up, trace, checks


@dataclass(frozen=True)
class Spec:
    variant: str
    mode: str
    kind: str
    size: int | None = None
    builder: str | None = None  # default: the variant's

    @property
    def needs_cuda(self) -> bool:
        if self.variant == "antipatterns":
            return ANTIPATTERNS[self.kind].cuda_only is not None
        return self.kind in NEEDS_CUDA

    @property
    def cuda_reason(self) -> str:
        if self.variant == "antipatterns":
            return str(ANTIPATTERNS[self.kind].cuda_only)
        return f"mode {self.mode!r} needs a CUDA device"

    def build(self, opts: Options) -> Case:
        return _BUILDERS[self.builder or self.variant](self, opts)


def plan(variants: list[str], kinds: list[str] | None, opts: Options) -> list[Spec]:
    """Specs in a fixed order (variant order, then mode order); ``kinds`` filters by mode kind."""
    specs: list[Spec] = []
    suffix = MEMORY_SUFFIX if opts.profile_memory else ""
    for variant in VARIANTS:
        if variant not in variants:
            continue
        first_call = opts.from_first_call and variant in FIRST_CALL_VARIANTS
        for kind in SWEEP_KINDS if first_call else MODE_KINDS[variant]:
            if kinds and kind not in kinds:
                continue
            if first_call:
                specs.append(Spec(variant, f"{kind}{sweep.SWEEP_SUFFIX}{suffix}", kind, builder="mlp_sweep"))
            elif variant == "matmul_add":
                specs.extend(Spec(variant, f"{kind}-{n}{suffix}", kind, n) for n in opts.sizes)
            else:
                specs.append(Spec(variant, f"{kind}{suffix}", kind))
    return specs


# ---------------------------------------------------------------------------------------------- helpers


def _torch_dtype(opts: Options) -> Any:
    import torch

    return getattr(torch, DTYPES[opts.dtype])


def _fresh_compile() -> None:
    # Each compiled case starts from an empty Dynamo cache: otherwise a later case could reuse (or be
    # forced to recompile with dynamic shapes against) an earlier case's graph for the same code object.
    import torch

    torch._dynamo.reset()


def _no_grad(fn: Callable[[], Any]) -> Callable[[], Any]:
    import torch

    def step() -> Any:
        with torch.no_grad():
            return fn()

    return step


def _rel(out: Any, ref: Any) -> float:
    from capture.timing import rel_err

    return rel_err(out, ref)


# ------------------------------------------------------------------------------------------- matmul_add


def _matmul_add(x: Any, w: Any, b: Any) -> Any:
    import torch

    return torch.add(torch.matmul(x, w), b)


def _build_matmul_add(spec: Spec, opts: Options) -> Case:
    import torch

    torch.manual_seed(opts.seed)
    n, dt, dev = spec.size, _torch_dtype(opts), opts.device
    assert n is not None
    x, w, b = (torch.randn(n, n, dtype=dt, device=dev), torch.randn(n, n, dtype=dt, device=dev),
               torch.randn(n, dtype=dt, device=dev))
    fn = _matmul_add
    if spec.kind == "compile":
        _fresh_compile()
        fn = torch.compile(_matmul_add, dynamic=False)

    def check() -> dict[str, Any]:
        xs = [torch.randn(n, n, dtype=dt, device=dev), torch.randn(n, n, dtype=dt, device=dev),
              torch.randn(n, dtype=dt, device=dev)]
        out = fn(*xs)
        res = {"rel_err_vs_fp64": _rel(out, _matmul_add(*(t.double() for t in xs)))}
        if spec.kind != "eager":
            res["rel_err_vs_eager"] = _rel(out, _matmul_add(*xs))
        return res

    return Case(spec.variant, spec.mode, LABELS["matmul_add"], opts.dtype,
                {"x": [n, n], "w": [n, n], "b": [n]}, _no_grad(lambda: fn(x, w, b)), _no_grad(check))


# ----------------------------------------------------------------------------------------------- linear


def _build_linear(spec: Spec, opts: Options) -> Case:
    import torch
    from torch import nn

    torch.manual_seed(opts.seed)
    batch, d_in, d_out = opts.linear_shape
    dt, dev = _torch_dtype(opts), opts.device
    eager = nn.Linear(d_in, d_out, bias=True).to(device=dev, dtype=dt)
    model: Any = eager
    if spec.kind == "compile":
        _fresh_compile()
        model = torch.compile(eager, dynamic=False)
    x = torch.randn(batch, d_in, dtype=dt, device=dev)

    def check() -> dict[str, Any]:
        xs = torch.randn(batch, d_in, dtype=dt, device=dev)
        out = model(xs)
        ref64 = torch.nn.functional.linear(xs.double(), eager.weight.double(), eager.bias.double())
        res = {"rel_err_vs_fp64": _rel(out, ref64)}
        if spec.kind != "eager":
            res["rel_err_vs_eager"] = _rel(out, eager(xs))
        return res

    shapes = {"x": [batch, d_in], "weight": [d_out, d_in], "bias": [d_out]}
    return Case(spec.variant, spec.mode, LABELS["linear"], opts.dtype, shapes, _no_grad(lambda: model(x)),
                _no_grad(check))


# -------------------------------------------------------------------------------------------------- mlp


def make_geglu_mlp(dim: int, hidden: int) -> Any:
    """The GeGLU MLP of Gemma-style models: down(gelu_tanh(gate(x)) * up(x)), no biases."""
    import torch
    from torch import nn

    class GeGLUMLP(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.gate_proj = nn.Linear(dim, hidden, bias=False)
            self.up_proj = nn.Linear(dim, hidden, bias=False)
            self.down_proj = nn.Linear(hidden, dim, bias=False)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.down_proj(nn.functional.gelu(self.gate_proj(x), approximate="tanh") * self.up_proj(x))

    return GeGLUMLP()


def geglu_reference64(mlp: Any, x: Any) -> Any:
    """The GeGLU MLP's output computed in float64 from its weights (the precision reference)."""
    import torch

    w = {k: v.double() for k, v in mlp.state_dict().items()}
    x64 = x.double()
    h = torch.nn.functional.gelu(x64 @ w["gate_proj.weight"].T, approximate="tanh") * (x64 @ w["up_proj.weight"].T)
    return h @ w["down_proj.weight"].T


def _display_path(path: str | None) -> str | None:
    # Paths under the working directory are recorded relative to it: the manifest is shared, the host's
    # directory layout is not part of the result.
    if not path:
        return path
    try:
        return str(Path(path).resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return path


def load_liger(kernel_repo: str | None) -> tuple[Any, dict[str, Any]]:
    """``kernels.get_kernel(LIGER_REPO, version=1)`` and a record of where the module came from.

    With ``kernel_repo`` (or ``LOCAL_KERNELS`` naming LIGER_REPO) kernels loads that local folder
    (see capture.liger_local); otherwise it resolves the Hub (or its cache when HF_HUB_OFFLINE=1).
    """
    if kernel_repo:
        entry = f"{LIGER_REPO}={Path(kernel_repo).resolve()}"
        others = [e for e in os.environ.get("LOCAL_KERNELS", "").split(":") if e and not e.startswith(f"{LIGER_REPO}=")]
        os.environ["LOCAL_KERNELS"] = ":".join([*others, entry])
    import kernels

    module = kernels.get_kernel(LIGER_REPO, version=LIGER_VERSION)
    local_map = dict(
        e.split("=", 1) for e in os.environ.get("LOCAL_KERNELS", "").split(":") if "=" in e
    )
    source: dict[str, Any] = {
        "repo_id": LIGER_REPO,
        "version": LIGER_VERSION,
        "loaded_through": "kernels.get_kernel",
        "module": getattr(module, "__name__", None),
        "module_file": _display_path(getattr(module, "__file__", None)),
    }
    loaded = next((lk for lk in kernels.get_loaded_kernels() if lk.module is module), None)
    if loaded is not None:
        md = loaded.metadata
        source["metadata"] = {"id": md.id, "name": str(md.name), "version": md.version, "license": md.license,
                              "upstream": md.upstream}
        if loaded.repo_info is not None:
            source["revision"] = str(getattr(loaded.repo_info, "revision", "")) or None
    if LIGER_REPO in local_map:
        source["source"] = "local"
        source["local_repo"] = _display_path(local_map[LIGER_REPO])
        prov = Path(getattr(module, "__file__", "") or "").resolve().parent.parent / "PROVENANCE.json"
        if prov.exists():
            source["provenance"] = json.loads(prov.read_text())
            source["description"] = ("liger-kernel {} GeGLU, packaged as a local kernel and loaded through "
                                     "kernels".format(source["provenance"].get("liger_kernel_version")))
    else:
        source["source"] = "hub-cache" if os.environ.get("HF_HUB_OFFLINE") else "hub"
        source["description"] = f"{LIGER_REPO} v{LIGER_VERSION} from the Hugging Face Hub, loaded through kernels"
    return module, source


def _build_mlp(spec: Spec, opts: Options) -> Case:
    import copy

    import torch

    torch.manual_seed(opts.seed)
    batch, seq, dim, hidden = opts.mlp_shape
    dt, dev = _torch_dtype(opts), opts.device
    eager = make_geglu_mlp(dim, hidden).to(device=dev, dtype=dt)
    notes: dict[str, Any] = {}
    if spec.kind == "eager":
        model: Any = eager
    elif spec.kind == "compile":
        _fresh_compile()
        model = torch.compile(copy.deepcopy(eager), dynamic=False)
    elif spec.kind == "compile-cudagraphs":
        _fresh_compile()
        model = torch.compile(copy.deepcopy(eager), mode="reduce-overhead", dynamic=False)
    elif spec.kind == "liger":
        module, notes["kernel_source"] = load_liger(opts.kernel_repo)
        cfg = SimpleNamespace(hidden_size=dim, intermediate_size=hidden, hidden_act="gelu_pytorch_tanh")
        model = module.layers.LigerGEGLUMLP(cfg).to(device=dev, dtype=dt)
        model.load_state_dict(eager.state_dict())  # same weights as eager: outputs must agree
    else:
        raise ValueError(f"unknown mlp mode {spec.kind!r}")

    graphs = spec.kind == "compile-cudagraphs"

    def call(inp: Any) -> Any:
        if graphs:
            # Tell cudagraph trees a new iteration starts, so replays may overwrite earlier outputs.
            torch.compiler.cudagraph_mark_step_begin()
        return model(inp)

    x = torch.randn(batch, seq, dim, dtype=dt, device=dev)

    def check() -> dict[str, Any]:
        xs = torch.randn(batch, seq, dim, dtype=dt, device=dev)
        out = call(xs).clone()
        res = {"rel_err_vs_fp64": _rel(out, geglu_reference64(eager, xs))}
        if spec.kind != "eager":
            res["rel_err_vs_eager"] = _rel(out, eager(xs))
        return res

    shapes = {"x": [batch, seq, dim], "gate_proj": [hidden, dim], "up_proj": [hidden, dim], "down_proj": [dim, hidden]}
    return Case(spec.variant, spec.mode, LABELS["mlp"], opts.dtype, shapes, _no_grad(lambda: call(x)),
                _no_grad(check), notes)


# ------------------------------------------------------------------------------------------------ train


def make_gpt(layers: int, dim: int, heads: int, vocab: int, seq: int) -> Any:
    """A GPT-2-shaped decoder (pre-LayerNorm, fused QKV, SDPA causal attention, tied embeddings) in plain
    torch, so capturing a training step needs no transformers install."""
    import torch
    from torch import nn
    from torch.nn import functional as F

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.ln_1 = nn.LayerNorm(dim)
            self.c_attn = nn.Linear(dim, 3 * dim)
            self.c_proj = nn.Linear(dim, dim)
            self.ln_2 = nn.LayerNorm(dim)
            self.c_fc = nn.Linear(dim, 4 * dim)
            self.mlp_proj = nn.Linear(4 * dim, dim)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            b, t, c = x.shape
            q, k, v = self.c_attn(self.ln_1(x)).split(dim, dim=2)
            q, k, v = (z.view(b, t, heads, c // heads).transpose(1, 2) for z in (q, k, v))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.c_proj(y.transpose(1, 2).reshape(b, t, c))
            return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))

    class GPT(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.wte = nn.Embedding(vocab, dim)
            self.wpe = nn.Embedding(seq, dim)
            self.h = nn.ModuleList(Block() for _ in range(layers))
            self.ln_f = nn.LayerNorm(dim)
            self.lm_head = nn.Linear(dim, vocab, bias=False)
            self.lm_head.weight = self.wte.weight
            for m in self.modules():
                if isinstance(m, (nn.Linear, nn.Embedding)):
                    nn.init.normal_(m.weight, std=0.02)

        def forward(self, idx: torch.Tensor) -> torch.Tensor:
            pos = torch.arange(idx.shape[1], device=idx.device)
            x = self.wte(idx) + self.wpe(pos)
            for block in self.h:
                x = block(x)
            return self.lm_head(self.ln_f(x))

    return GPT()


def _build_train(spec: Spec, opts: Options) -> Case:
    import torch
    from torch.nn import functional as F

    torch.manual_seed(opts.seed)
    batch, seq = opts.train_shape
    layers, dim, heads, vocab = opts.train_model
    dev = opts.device
    model = make_gpt(layers, dim, heads, vocab, seq).to(dev)  # fp32 master weights, autocast below
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1)
    idx = torch.randint(0, vocab, (batch, seq), device=dev)
    targets = torch.randint(0, vocab, (batch, seq), device=dev)
    amp = opts.dtype != "fp32"
    amp_dtype = _torch_dtype(opts)
    losses: list[float] = []

    def step() -> Any:
        opt.zero_grad(set_to_none=True)
        with torch.autocast(device_type=dev, dtype=amp_dtype, enabled=amp):
            logits = model(idx)
            loss = F.cross_entropy(logits.view(-1, vocab).float(), targets.view(-1))
        loss.backward()
        opt.step()
        return loss

    def check() -> dict[str, Any]:
        # A training step has no second implementation to compare with: check it learns (the same batch
        # every step, so the loss must fall) and stays finite.
        for _ in range(3):
            losses.append(float(step().item()))
        return {"loss_first": losses[0], "loss_last": losses[-1], "loss_decreased": losses[-1] < losses[0]}

    params = sum(p.numel() for p in model.parameters())
    shapes = {"idx": [batch, seq], "layers": layers, "dim": dim, "heads": heads, "vocab": vocab, "params": params}
    dtype = f"{opts.dtype} autocast, fp32 weights" if amp else "fp32"
    return Case(spec.variant, spec.mode, LABELS["train"], dtype, shapes, step, check,
                {"optimizer": "AdamW (default foreach)", "model": "GPT-2-shaped decoder, random weights"},
                warmup_calls=3, bench_rep_ms=1000.0)


_BUILDERS: dict[str, Callable[[Spec, Options], Case]] = {
    "matmul_add": _build_matmul_add,
    "linear": _build_linear,
    "mlp": _build_mlp,
    "train": _build_train,
    "mlp_sweep": sweep.build,
    "antipatterns": antipatterns.build,
}
