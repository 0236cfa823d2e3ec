"""Small training loops with one performance problem planted on purpose, and their healthy controls.

Contract: ``tracekit capture --variant antipatterns`` records one capture per row of :data:`TABLE`, trace
``antipatterns_<mode>.json.gz``: the same small training loop (an MLP of ``blocks`` blocks, MSE loss,
AdamW, a host batch copied in each step) under a profiler schedule, each step one
``record_function("train_step")`` inside its ``ProfilerStep#N``. The loop runs like a real one: no
device synchronise inside the profiled steps (only before the window, so it starts on an idle GPU),
nothing run before the profiler starts (the schedule's wait/warmup steps warm it up).

The healthy loop (:class:`Loop` defaults): fp32 weights with TF32 matmuls
(``torch.set_float32_matmul_precision("high")``), a pinned host batch copied with
``non_blocking=True``, ReLU blocks, ``AdamW(fused=True)``, ``zero_grad(set_to_none=True)``, no host
synchronisation, warm. Every other row changes one thing (``loop``), and its manifest entry says what
was planted (``planted``: the problem's id; ``None`` for a control), the ops where it shows
(``evidence``: op name, count per step, where in the code), the steps it occurs in, the fix, and the
trace to compare with (``control``). Rows whose problem exists only on a CUDA device are skipped on
CPU with the reason (``cuda_only``).

torch is imported inside functions only.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import Any

LABEL = "train_step"
# batch, dim, hidden, blocks: on an H200 (TF32) the healthy step's GPU work (6.9 ms) clearly exceeds its
# CPU dispatch under the profiler (3.9-4.5 ms); at batch 4096 the two were within 15 %.
DEFAULT_SHAPE = (8192, 1024, 4096, 4)
TINY = (32, 64, 256)  # batch, dim, hidden of the overhead-bound loop: microsecond kernels


@dataclass(frozen=True)
class Loop:
    """One training loop's settings; the defaults are the healthy loop."""

    size: str = "default"       # "default": --antipattern-shape; "tiny": TINY (blocks kept)
    act: str = "relu"           # "relu": down(relu(up(x))); "geglu": down(gelu_tanh(gate(x)) * up(x))
    compiled: bool = False      # torch.compile(model) (compiles in the schedule's first, unrecorded step)
    pinned: bool = True         # pinned batch, .to(device, non_blocking=True); False: pageable, blocking
    tf32: bool = True           # float32 matmul precision "high" (TF32) or "highest" (IEEE fp32)
    optimizer: str = "fused"    # AdamW(fused=True) | "foreach": AdamW(foreach=True) | "for-loop": foreach=False
    set_to_none: bool = True    # zero_grad(set_to_none=...)
    host_sync: bool = False     # loss.item(), (out > 0).nonzero(), grad.norm().cpu() on device tensors
    cpu_item: bool = False      # .item() on a CPU tensor: synchronises nothing
    copies: bool = False        # block 0: up.weight.t().contiguous() and relu(h).clone() each step
    cold: bool = False          # schedule(wait=0, warmup=0): the loop's very first step is recorded
    graphed: bool = False       # the whole step (forward, backward, AdamW(capturable)) replayed as one CUDA graph


@dataclass(frozen=True)
class Antipattern:
    mode: str
    planted: str | None                 # the problem's id; None for a control
    what: str
    fix: str | None = None
    control: str | None = None          # the mode to compare with (the same loop without the problem)
    control_for: tuple[str, ...] = ()   # problems this trace is the near-miss control of
    loop: Loop = field(default_factory=Loop)
    cuda_only: str | None = None
    incidental: str | None = None       # a known, unplanted problem this trace also shows (see _incidental)


HEALTHY = "healthy"
# Order matters: cold-first-step runs first so its first step is the process's first training step.
TABLE: tuple[Antipattern, ...] = (
    Antipattern(
        "cold-first-step", "cold_first_step",
        "the loop's first step is inside the window (schedule wait=0, warmup=0): first launches of its "
        "kernels, optimizer state creation, caching-allocator growth and autograd's device thread start",
        "warm up before measuring (a profiler schedule with wait/warmup steps, or skip the first steps)",
        control=HEALTHY, loop=Loop(cold=True)),
    Antipattern(
        HEALTHY, None,
        "TF32 matmuls, pinned non_blocking input copies, ReLU blocks, AdamW(fused=True), "
        "zero_grad(set_to_none=True), no host synchronisation, warm",
        control_for=("cold_first_step", "pageable_copy", "fp32_gemm", "hot_path_copy",
                     "optimizer_unfused", "zero_grad_fill")),
    Antipattern(
        "overhead-bound", "overhead_bound",
        f"the same loop at batch {TINY[0]}, dim {TINY[1]}, hidden {TINY[2]}: each kernel runs for microseconds, "
        "so the CPU's dispatch of the step takes longer than its GPU work",
        "fewer, larger launches: CUDA graphs (torch.compile(mode='reduce-overhead')), torch.compile, a larger batch",
        control="overhead-bound-graphed", loop=Loop(size="tiny")),
    Antipattern(
        "overhead-bound-graphed", None,
        "near miss: the same tiny loop with its whole step (forward, backward, AdamW(fused, capturable)) "
        "captured once as a CUDA graph and replayed each step: one launch instead of the step's dispatch",
        control_for=("overhead_bound",), loop=Loop(size="tiny", graphed=True),
        cuda_only="CUDA graphs need a CUDA device"),
    Antipattern(
        "host-sync", "host_sync",
        "three host synchronisations per step on device tensors: loss.item() and (out > 0).nonzero() after "
        "the forward, grad.norm().cpu() after the backward",
        "keep values on the device (log the loss every N steps, accumulate on the GPU); no .item(), .cpu() "
        "or nonzero() in the step",
        control="host-sync-cpu-item", loop=Loop(host_sync=True)),
    Antipattern(
        "host-sync-cpu-item", None,
        "near miss: .item() on a CPU tensor each step (no device synchronisation)",
        control_for=("host_sync",), loop=Loop(cpu_item=True)),
    Antipattern(
        "h2d-pageable", "pageable_copy",
        "the host batch is pageable (not pinned) and copied with a blocking .to(device) each step",
        "pin the batch (DataLoader(pin_memory=True) or tensor.pin_memory()) and copy with non_blocking=True",
        control=HEALTHY, loop=Loop(pinned=False), cuda_only="pageable vs pinned host memory needs a CUDA device"),
    Antipattern(
        "gemm-fp32", "fp32_gemm",
        "float32 matmuls without TF32 (torch.set_float32_matmul_precision('highest'), i.e. allow_tf32=False)",
        "torch.backends.cuda.matmul.allow_tf32 = True (torch.set_float32_matmul_precision('high')) or bf16 autocast",
        control=HEALTHY, loop=Loop(tf32=False), cuda_only="TF32 is a CUDA matmul mode"),
    Antipattern(
        "pointwise-unfused", "unfused_pointwise",
        "GeGLU blocks in eager mode: gelu(tanh) and mul run as separate kernels whose intermediates "
        "round-trip through memory (forward and backward)",
        "torch.compile the model (fuses GeLU and mul) or a fused kernel (Liger's GeGLU)",
        control="pointwise-fused", loop=Loop(act="geglu")),
    Antipattern(
        "pointwise-fused", None,
        "near miss: the same GeGLU loop compiled with torch.compile (one fused kernel per chain)",
        control_for=("unfused_pointwise",), loop=Loop(act="geglu", compiled=True), incidental="hot_path_copy"),
    Antipattern(
        "extra-copies", "hot_path_copy",
        "copies in the hot path: block 0 multiplies by up.weight.t().contiguous() and clones its activation",
        "use the weight as stored (F.linear takes it transposed) and drop the defensive clone()",
        control=HEALTHY, loop=Loop(copies=True)),
    Antipattern(
        "optimizer-unfused", "optimizer_unfused",
        "AdamW(foreach=False): a for-loop over parameters launching small kernels per parameter per operation",
        "AdamW(fused=True), or foreach=True (the CUDA default)",
        control=HEALTHY, loop=Loop(optimizer="for-loop")),
    Antipattern(
        "optimizer-foreach", None,
        "near miss: AdamW(foreach=True), multi-tensor kernels over all parameters",
        control_for=("optimizer_unfused",), loop=Loop(optimizer="foreach")),
    Antipattern(
        "zero-grad-fill", "zero_grad_fill",
        "zero_grad(set_to_none=False): every gradient is filled with zeros each step and backward adds into it",
        "zero_grad(set_to_none=True) (the default since torch 2.0)",
        control=HEALTHY, loop=Loop(set_to_none=False)),
)
MODES = tuple(a.mode for a in TABLE)
BY_MODE = {a.mode: a for a in TABLE}


def _shape(loop: Loop, shape: tuple[int, int, int, int]) -> tuple[int, int, int, int]:
    batch, dim, hidden, blocks = shape
    if loop.size == "tiny":
        return min(batch, TINY[0]), min(dim, TINY[1]), min(hidden, TINY[2]), blocks
    return batch, dim, hidden, blocks


def gemm_counts(loop: Loop, batch: int, dim: int, hidden: int, blocks: int) -> dict[str, int]:
    """GEMMs per training step and their FLOP: each Linear once forward, and in backward once for its
    weight's gradient and once for its input's, except the first block's input projections (x needs no
    gradient)."""
    per_block = [(dim, hidden), (dim, hidden), (hidden, dim)] if loop.act == "geglu" else [(dim, hidden), (hidden, dim)]
    first = 2 if loop.act == "geglu" else 1  # linears reading x in block 0
    gemms = flop = 0
    for b in range(blocks):
        for j, (din, dout) in enumerate(per_block):
            passes = 2 if (b == 0 and j < first) else 3
            gemms += passes
            flop += passes * 2 * batch * din * dout
    return {"gemms_per_step": gemms, "gemm_flop_per_step": flop}


def _evidence(ap: Antipattern, batch: int, dim: int, hidden: int, blocks: int, params: int) -> list[dict[str, Any]]:
    loop = ap.loop
    if ap.planted is None and not loop.cpu_item:
        return []
    g = gemm_counts(loop, batch, dim, hidden, blocks)
    ev = {
        "cold_first_step": [{"step": "ProfilerStep#0", "where": "the loop's first step"}],
        "overhead_bound": [{"op": LABEL, "per_step": 1, "where": "every step: tiny kernels, CPU dispatch dominates"}],
        "host_sync": [
            {"op": "aten::item", "per_step": 1, "where": "loss.item() after the forward"},
            {"op": "aten::nonzero", "per_step": 1, "where": "(out > 0).nonzero() after the forward"},
            {"op": "aten::to", "per_step": 1, "where": "block 0 up.weight.grad.norm().cpu() after the backward"},
        ],
        "pageable_copy": [{"op": "aten::to", "per_step": 2, "bytes_each": batch * dim * 4,
                           "memcpy": "Memcpy HtoD (Pageable -> Device)", "where": "x and y batch .to(device)"}],
        "fp32_gemm": [{"op": "aten::mm", "per_step": g["gemms_per_step"],
                       "where": "every Linear, forward and backward (fp32 without TF32)"}],
        "unfused_pointwise": [
            {"op": "aten::gelu", "per_step": blocks, "input_dims": [batch, hidden], "where": "forward, each block"},
            {"op": "aten::mul", "per_step": 3 * blocks, "input_dims": [batch, hidden],
             "where": "forward gelu(gate) * up in each block, and its backward's two products"},
            {"op": "aten::gelu_backward", "per_step": blocks, "input_dims": [batch, hidden],
             "where": "backward, each block"},
        ],
        "hot_path_copy": [
            {"op": "aten::contiguous", "per_step": 1, "input_dims": [dim, hidden],
             "where": "block 0 forward: up.weight.t().contiguous()"},
            {"op": "aten::clone", "per_step": 1, "input_dims": [batch, hidden], "outside": "aten::contiguous",
             "where": "block 0 forward: relu(h).clone() (aten::contiguous's own aten::clone not counted)"},
            {"op": "aten::copy_", "per_step": 1, "input_dims": [hidden, dim], "inside": "torch::autograd::AccumulateGrad",
             "where": "backward: up.weight's gradient arrives transposed through t().contiguous(), so "
                      "AccumulateGrad copies it into .grad (the healthy loop has no such copy)"},
        ],
        "optimizer_unfused": [{"op": "Optimizer.step#AdamW.step", "per_step": 1, "params": params,
                               "where": "AdamW(foreach=False): per-parameter kernels"}],
        "zero_grad_fill": [{"op": "Optimizer.zero_grad#AdamW.zero_grad", "per_step": 1, "params": params,
                            "where": "zero_grad(set_to_none=False): gradients filled with zeros"}],
    }
    if ap.planted is None:  # the CPU-item near miss: the op is there, the synchronisation is not
        return [{"op": "aten::item", "per_step": 1, "device": "cpu", "where": "lr_scale.item() on a CPU tensor"}]
    return ev[ap.planted]


def _incidental(ap: Antipattern, batch: int, dim: int, hidden: int, blocks: int) -> list[dict[str, Any]]:
    """Problems a trace shows that were not planted (seen on the H200, torch 2.11), so a control is not
    mistaken for a false positive when a rule rightly finds them."""
    if ap.incidental == "hot_path_copy":
        return [{"problem": "hot_path_copy", "op": "aten::addmm", "per_step": blocks - 1,
                 "memcpy": "Memcpy DtoD (Device -> Device)", "bytes_each": batch * dim * 4,
                 "where": "compiled backward: the input gradient of blocks 1.. is an addmm whose output is "
                          "first seeded with a device-to-device copy (Inductor's addmm lowering)"}]
    return []


@contextmanager
def _matmul_precision(tf32: bool):
    import torch

    previous = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("high" if tf32 else "highest")
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(previous)


def make_net(dim: int, hidden: int, blocks: int, act: str, copies: bool) -> Any:
    """``blocks`` MLP blocks without biases: ReLU (up, down) or GeGLU (gate, up, down)."""
    import torch
    from torch import nn
    from torch.nn import functional as F

    class Block(nn.Module):
        def __init__(self, copy_in_hot_path: bool) -> None:
            super().__init__()
            self.copies = copy_in_hot_path
            if act == "geglu":
                self.gate = nn.Linear(dim, hidden, bias=False)
            self.up = nn.Linear(dim, hidden, bias=False)
            self.down = nn.Linear(hidden, dim, bias=False)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            if act == "geglu":
                return self.down(F.gelu(self.gate(x), approximate="tanh") * self.up(x))
            if self.copies:
                h = x @ self.up.weight.t().contiguous()  # planted: a copy of the weight every step
                return self.down(torch.relu(h).clone())  # planted: a defensive copy of the activation
            return self.down(torch.relu(self.up(x)))

    return nn.Sequential(*(Block(copies and i == 0) for i in range(blocks)))


def build(spec: Any, opts: Any) -> Any:
    import torch
    from torch.nn import functional as F

    from capture.record import Schedule
    from capture.variants import Case

    ap = BY_MODE[spec.kind]
    loop = ap.loop
    dev = opts.device
    batch, dim, hidden, blocks = _shape(loop, opts.antipattern_shape)
    torch.manual_seed(opts.seed)
    if loop.compiled:
        torch._dynamo.reset()
    net = make_net(dim, hidden, blocks, loop.act, loop.copies).to(dev)
    model = torch.compile(net) if loop.compiled else net
    optimizer_kwargs = {"fused": {"fused": True}, "foreach": {"foreach": True}, "for-loop": {"foreach": False}}
    graphed = loop.graphed and dev == "cuda"
    # A step replayed as a CUDA graph keeps the optimizer's step count on the device (capturable).
    opt = torch.optim.AdamW(net.parameters(), lr=1e-3, **optimizer_kwargs[loop.optimizer],
                            **({"capturable": True} if graphed else {}))
    pin = loop.pinned and dev == "cuda"
    x_src = torch.randn(batch, dim)
    y_src = torch.randn(batch, dim)
    if pin:
        x_src, y_src = x_src.pin_memory(), y_src.pin_memory()
    lr_scale = torch.tensor(1.0)  # a CPU scalar (the near miss reads it)
    first_weight = net[0].up.weight
    losses: list[Any] = []
    host_values: list[Any] = []

    def step() -> Any:
        opt.zero_grad(set_to_none=loop.set_to_none)
        x = x_src.to(dev, non_blocking=pin)
        y = y_src.to(dev, non_blocking=pin)
        out = model(x)
        loss = F.mse_loss(out, y)
        if loop.host_sync:
            host_values.append(loss.item())
            host_values.append(int((out.detach() > 0).nonzero().shape[0]))
        if loop.cpu_item:
            host_values.append(lr_scale.item())
        loss.backward()
        if loop.host_sync:
            host_values.append(first_weight.grad.norm().cpu())
        opt.step()
        losses.append(loss.detach())
        return loss

    if graphed:
        # Captured under the loop's matmul precision: the graph keeps the GEMM kernels chosen now.
        with _matmul_precision(loop.tf32):
            step = _graphed_step(model, opt, x_src, y_src, dev, pin, losses)

    params = sum(1 for _ in net.parameters())
    schedule = Schedule(0, 0, opts.schedule.active + 1) if loop.cold else opts.schedule
    first_active = schedule.wait + schedule.warmup
    steps = [f"ProfilerStep#{i}" for i in range(first_active, schedule.total)]

    def after_trace() -> dict[str, Any]:
        values = [float(v) for v in losses[: schedule.total]]  # the profiled loop's steps, not the bench's
        # The targets are random: the loop is a workload, not a model to train; losses show it ran.
        return {"losses": values}

    notes = {
        "planted": ap.planted,
        "what": ap.what,
        "fix": ap.fix,
        "control": ap.control,
        "control_for": list(ap.control_for),
        "evidence": _evidence(ap, batch, dim, hidden, blocks, params),
        "incidental": _incidental(ap, batch, dim, hidden, blocks) if dev == "cuda" else [],
        "steps": steps,
        "cold_step": "ProfilerStep#0" if loop.cold else None,
        "loop": asdict(loop),
        "params": params,
        "param_numel": sum(p.numel() for p in net.parameters()),
        "h2d_bytes_per_step": 2 * batch * dim * 4 if dev == "cuda" else 0,
        **gemm_counts(loop, batch, dim, hidden, blocks),
        "optimizer": f"AdamW({', '.join(f'{k}={v}' for k, v in optimizer_kwargs[loop.optimizer].items())})",
        "schedule": asdict(schedule),
    }
    shapes = {"x": [batch, dim], "y": [batch, dim], "dim": dim, "hidden": hidden, "blocks": blocks}
    dtype = "fp32 (TF32 matmuls)" if loop.tf32 else "fp32 (IEEE matmuls, no TF32)"
    if graphed:
        notes["optimizer"] += " capturable=True, the whole step replayed as one CUDA graph"
    return Case(spec.variant, spec.mode, LABEL, dtype, shapes, step, check=None, notes=notes, warmup_calls=0,
                schedule=schedule, sync_each_step=False, after_trace=after_trace,
                context=lambda: _matmul_precision(loop.tf32))



def _graphed_step(model: Any, opt: Any, x_src: Any, y_src: Any, dev: str, pin: bool, losses: list[Any]) -> Any:
    """The training step captured once as a CUDA graph (PyTorch's whole-network capture recipe:
    warm-up iterations on a side stream, gradients set to None so backward allocates them from the
    graph's pool, a capturable optimizer) and a step function that copies the batch into the graph's
    static inputs and replays it: one graph launch instead of the step's hundreds of launches."""
    import torch
    from torch.nn import functional as F

    static_x, static_y = x_src.to(dev), y_src.to(dev)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            opt.zero_grad(set_to_none=True)
            F.mse_loss(model(static_x), static_y).backward()
            opt.step()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    opt.zero_grad(set_to_none=True)
    with torch.cuda.graph(graph):
        static_loss = F.mse_loss(model(static_x), static_y)
        static_loss.backward()
        opt.step()

    def step() -> Any:
        static_x.copy_(x_src, non_blocking=pin)
        static_y.copy_(y_src, non_blocking=pin)
        graph.replay()
        losses.append(static_loss.detach().clone())
        return static_loss

    return step
