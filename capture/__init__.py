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
  ``linear``: eager, compile; ``mlp``: eager, compile, compile-cudagraphs, liger; ``train``: eager.

Modules: ``variants`` (models and step functions), ``record`` (profiler and atomic files), ``timing``
(benchmarks, relative error, ceilings), ``manifest`` (environment and manifest file), ``liger_local``
(build an offline kernels repository for Liger), ``cli`` (the click command).
"""
