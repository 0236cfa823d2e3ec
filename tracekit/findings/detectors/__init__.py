"""The finding rules, one module per rule, and their order.

Contract: each rule module (:class:`tracekit.findings.model.RuleModule`) holds its thresholds (named
constants, each with the reason it has that value), its table row ``RULE`` (a
:class:`~tracekit.findings.model.Rule` whose id is the module's name) and its detector ``detect``.
:data:`RULE_MODULES` lists them in table order: the order of :func:`tracekit.findings.rule_ids`
(what ``--fail-if finding:ID`` and ``no_finding`` accept, and how an unknown id's message lists
them) and the order the detectors run. A new rule is a new module here and one line in that list.
Modules not in the list (:mod:`.copies`, :mod:`.annotated`, :mod:`.host_wait`) are what several rules share.
"""

from __future__ import annotations

from tracekit.findings.detectors import (allocator_churn, cold_first_step, compile_preop_tax, conv_layout_transpose,
                                         cpu_tensor_copy, ddp_bucket_copy, dtype_cast, exposed_comm, fp32_gemm,
                                         gemm_bias_seed, host_sync, hot_path_copy, input_stall, kernel_time_varies,
                                         kv_cache_cat, occupancy_query, optimizer_unfused, out_of_memory, overhead_bound,
                                         pageable_copy, recompile, unfused_pointwise, zero_grad_fill)
from tracekit.findings.model import RuleModule

#: Every rule's module, in table order (module docstring).
RULE_MODULES: tuple[RuleModule, ...] = (
    overhead_bound,
    cold_first_step,
    input_stall,
    cpu_tensor_copy,
    host_sync,
    pageable_copy,
    allocator_churn,
    exposed_comm,
    fp32_gemm,
    unfused_pointwise,
    hot_path_copy,
    dtype_cast,
    kv_cache_cat,
    conv_layout_transpose,
    ddp_bucket_copy,
    gemm_bias_seed,
    optimizer_unfused,
    zero_grad_fill,
    occupancy_query,
    compile_preop_tax,
    recompile,
    kernel_time_varies,
    out_of_memory,
)
