"""``tracekit capture``: record PyTorch profiler (Kineto) traces of known workloads on a GPU.

Contract:

- The only package of tracekit that imports torch, triton or kernels, and only lazily inside the
  command: ``capture.cli`` imports click and the stdlib alone, so ``tracekit report`` works without torch.
- ``tracekit capture --variant all --out DIR`` writes ``DIR/<variant>_<mode>.json.gz`` per capture
  (plus ``DIR/<variant>_<mode>.et.json.gz`` execution traces with ``--execution-trace``) and
  ``DIR/manifest.json`` (schema ``tracekit.capture-manifest/1``). Every file is written atomically
  (temp file + rename) the moment it is ready, and the manifest is rewritten after every capture, so a
  failing variant never loses the others; its error text is in the manifest.
- Variants and modes (names are an interface, the trace files are named after them):
  ``matmul_add``: eager-<N>, compile-<N> for each size N (default 64 and 4096);
  ``linear``: eager, compile; ``mlp``: eager, compile, compile-cudagraphs, liger; ``train``: eager;
  ``antipatterns``: one training loop per planted problem and its controls (cold-first-step, healthy,
  overhead-bound, host-sync, host-sync-cpu-item, h2d-pageable, gemm-fp32, pointwise-unfused,
  pointwise-fused, extra-copies, optimizer-unfused, optimizer-foreach, zero-grad-fill).
  ``--from-first-call`` turns ``mlp`` into a shape sweep profiled from its first call: modes
  eager-sweep, compile-sweep, compile-static-sweep, compile-dynamic-sweep, compile-cudagraphs-sweep,
  liger-sweep. ``--profile-memory`` appends ``-memory`` to every mode.
- ``tracekit capture --variant ranks --world-size N [--late RANK:PHASE:MS] --out DIR`` (asked for
  alone; no CUDA): N processes, one rank each of a gloo ``torch.distributed`` group on 127.0.0.1,
  train a small DDP model; each writes ``DIR/rank<r>.json.gz`` (its ``distributedInfo`` naming its
  rank) beside one ``DIR/manifest.json``, optionally with a real delay planted on one rank in one
  phase of the middle profiled step (``capture/ranks.py``).
- Ground truth beside the trace: per sweep call, Dynamo's counters and compilation records, the
  CUDA-graph tree state and Triton cache growth; per antipattern, what was planted at which op and its
  control; with ``--profile-memory`` on CUDA, the caching allocator's own figures for the window.

Modules: ``variants`` (the catalogue: options, specs, plan; the study's models and step functions),
``sweep`` (the shape sweep from the first call), ``antipatterns`` (the planted-problem table and its
training loop), ``ground_truth`` (what torch itself reports: Dynamo counters, compilation metrics,
CUDA-graph state, Triton cache, allocator), ``record`` (profiler loops and atomic files), ``session``
(one capture end to end), ``timing`` (benchmarks, relative error, ceilings), ``manifest`` (environment
and manifest file), ``ranks`` (the multi-process gloo DDP capture), ``liger_local`` (build an
offline kernels repository for Liger), ``cli`` (the click command).
"""
