"""Decoders for GEMM kernel names: cuBLASLt nvjet, cuBLAS xmma and legacy arch-named kernels, CUTLASS,
AMD Tensile (``Cijk_...``) and cuBLAS helpers.

Contract: each ``decode_*(name) -> dict`` returns only the fields it could read from the name (absent
rather than guessed), with these meanings where present:

- ``arch``: ``sm70``/``sm80``/``sm90``/``sm100`` or ``gfx942``/``gfx950``;
- ``tile``: CTA output tile ``"MxN"``; ``k_tile``: K depth per main-loop step (int); ``stages`` (int);
- ``cluster``: thread-block cluster ``"1x2"``; ``layout``: operand transposes as written (``tn``, ``TNT``);
- ``dtype``: input element type (``bf16``, ``fp16``, ``fp32``, ``tf32``, ``fp8``, ``fp64``, ``int8``);
- ``epilogue``: fused epilogue (``bias``, ``relu``, ``gelu``, ``bias+gelu`` ...) or ``none``;
- ``op``: ``gemm`` (default), ``gemv``, ``conv``, ``split_k_reduce``.
"""

from __future__ import annotations

import re

_ARCH_BY_NAME = {
    "maxwell": "sm50",
    "pascal": "sm60",
    "volta": "sm70",
    "turing": "sm75",
    "ampere": "sm80",
    "hopper": "sm90",
    "blackwell": "sm100",
}

# cuBLAS's one-letter type codes (as in h/s/d/c/z-gemm), extended for nvjet: t = bf16, q = fp8 e4m3.
_LETTER_DTYPE = {
    "h": "fp16",
    "s": "fp32",
    "d": "fp64",
    "c": "complex64",
    "z": "complex128",
    "t": "bf16",
    "q": "fp8",
    "e": "fp8",
    "i": "int8",
    "b": "bf16",
    "o": "fp4",
}

_DTYPE_TOKENS = {
    "bf16": "bf16",
    "fp16": "fp16",
    "f16": "fp16",
    "half": "fp16",
    "fp32": "fp32",
    "f32": "fp32",
    "tf32": "tf32",
    "fp64": "fp64",
    "f64": "fp64",
    "e4m3": "fp8",
    "e5m2": "fp8",
    "fp8": "fp8",
    "f8": "fp8",
    "i8": "int8",
    "s8": "int8",
    "int8": "int8",
    "fp4": "fp4",
    "e2m1": "fp4",
}

_EPILOGUES = ("bias", "badd", "relu", "gelu", "dgelu", "drelu", "silu", "swish", "aux", "bgrad", "bgrada",
              "bgradb", "sigmoid", "tanh")


def _epilogue(tokens: list[str]) -> str:
    found = [t.lower() for t in tokens if t.lower() in _EPILOGUES]
    return "+".join(dict.fromkeys(found)) if found else "none"


def _set_tile(out: dict[str, object], match: re.Match[str] | None) -> None:
    """``tile`` ("MxN") and ``k_tile`` from a match whose three groups are M, N and K."""
    if match:
        out["tile"] = f"{match.group(1)}x{match.group(2)}"
        out["k_tile"] = int(match.group(3))


def _set_int(out: dict[str, object], key: str, match: re.Match[str] | None) -> None:
    if match:
        out[key] = int(match.group(1))


def decode_nvjet(name: str) -> dict:
    """``nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_bias_TNT`` -> arch, variant, dtype, tile, k_tile,
    stages, cluster, cta, raster, bz, coop, split_k, epilogue, layout.

    Grammar (read off cuBLASLt 12.x/13.x names; older names omit the arch, e.g. ``nvjet_hsh_...``):
    ``nvjet_[smNN_]<types>_<MxN>_<K>x<stages>_<cluster>[_2cta]_<h|v>_bz[_coopA|_coopB][_splitK][_epi...]_<layout>``.
    ``<types>`` spells A/B, compute and D types with cuBLAS letters (``tst`` = bf16 in, fp32 compute,
    bf16 out; ``qqtst`` = fp8 inputs); ``h``/``v`` is the raster order of the tile scheduler.
    """
    tokens = name.split("(")[0].strip().split("_")[1:]
    out: dict[str, object] = {"op": "gemm"}
    i = 0
    if i < len(tokens) and re.fullmatch(r"sm\d+a?", tokens[i]):
        out["arch"] = tokens[i].rstrip("a")
        i += 1
    if i < len(tokens) and re.fullmatch(r"[a-z]{2,6}", tokens[i]):
        variant = tokens[i]
        out["variant"] = variant
        out["dtype"] = _LETTER_DTYPE.get(variant[0], variant)
        out["accumulate"] = _LETTER_DTYPE.get(variant[-2], variant[-2]) if len(variant) >= 3 else None
        i += 1
    rest = tokens[i:]
    sizes = [t for t in rest if re.fullmatch(r"\d+x\d+", t)]
    if sizes:
        out["tile"] = sizes[0]
    if len(sizes) > 1:
        k, stages = sizes[1].split("x")
        out["k_tile"], out["stages"] = int(k), int(stages)
    if len(sizes) > 2:
        out["cluster"] = sizes[2]
    flags = [t for t in rest if not re.fullmatch(r"\d+x\d+", t)]
    for t in flags:
        if re.fullmatch(r"\dcta", t):
            out["cta"] = int(t[0])
        elif t in ("h", "v"):
            out["raster"] = t
        elif t == "bz":
            out["bz"] = True
        elif t.startswith("coop"):
            out["coop"] = t
        elif t.lower() == "splitk":
            out["split_k"] = True
    out["epilogue"] = _epilogue(flags)
    if flags and re.fullmatch(r"[TNtn]{2,3}", flags[-1]):
        out["layout"] = flags[-1].upper()
    return {k: v for k, v in out.items() if v is not None}


def _first_dtype(text: str) -> str | None:
    for tok in re.findall(r"[a-z]+\d*", text.lower()):
        if tok in _DTYPE_TOKENS:
            return _DTYPE_TOKENS[tok]
    return None


def decode_xmma(name: str) -> dict:
    """``sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas``
    -> arch, dtype, math, accumulate, layout, tile, k_tile, stages, warps / warpgroups, instruction.

    Type groups are ``<A><B>_<math>..._<...accumulate>``: ``bf16bf16_bf16f32_f32`` multiplies bf16 and
    accumulates fp32; ``f32f32_tf32f32_f32`` is an fp32 GEMM run on tensor cores in tf32. ``accumulate``
    is the last type of the last group (``f32`` there, ``bf16f32`` in sm100 names).
    """
    m = re.search(r"sm(\d+)_xmma_(gemm|fprop|dgrad|wgrad)\w*?_((?:[a-z]+\d+){1,2})_((?:[a-z]+\d+){1,2})_((?:[a-z]+\d+){1,2})", name)
    out: dict[str, object] = {}
    arch = re.search(r"sm(\d+)_xmma", name)
    if arch:
        out["arch"] = f"sm{arch.group(1)}"
    op = re.search(r"xmma_(gemm|fprop|dgrad|wgrad)", name)
    out["op"] = "gemm" if (op is None or op.group(1) == "gemm") else "conv"
    if op is not None and op.group(1) != "gemm":
        out["pass"] = op.group(1)
    if m:
        out["dtype"] = _first_dtype(m.group(3))
        compute = re.findall(r"[a-z]+\d+", m.group(4))
        if compute:
            out["math"] = _DTYPE_TOKENS.get(compute[0], compute[0])
        last = re.findall(r"[a-z]+\d+", m.group(5))
        if last:
            out["accumulate"] = _DTYPE_TOKENS.get(last[-1], last[-1])
    else:
        dt = _first_dtype(name.split("xmma_", 1)[-1])
        if dt:
            out["dtype"] = dt
    lay = re.search(r"_(tn|nt|nn|tt)_(n|t)?_?", name)
    if lay:
        out["layout"] = lay.group(1)
    _set_tile(out, re.search(r"tilesize(\d+)x(\d+)x(\d+)", name))
    _set_int(out, "stages", re.search(r"_stage(\d+)", name))
    for key, pat in (("warps", r"warpsize(\d+x\d+x\d+)"), ("warpgroups", r"warpgroupsize(\d+x\d+x\d+)"),
                     ("instruction", r"tensor(\d+x\d+x\d+)")):
        mm = re.search(pat, name)
        if mm:
            out[key] = mm.group(1)
    seg = re.search(r"segment_k_(on|off)", name)
    if seg:
        out["split_k"] = seg.group(1) == "on"
    out["epilogue"] = _epilogue(re.split(r"_+", name))
    return {k: v for k, v in out.items() if v is not None}


def decode_cublas_legacy(name: str) -> dict:
    """``ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_32x5_tn`` -> arch, dtype, mma, tile, k_tile,
    stages, layout, ldg, epilogue. ``ampere_sgemm_128x64_tn`` -> fp32 SIMT GEMM.

    The ``sNNNNgemm`` / ``hNNNNgemm`` token is the tensor-core instruction (``s16816`` = m16n8k16 with fp32
    accumulate); the dtype is the explicit element token if there is one, otherwise the BLAS letter.
    """
    base = name[5:] if name.startswith("void ") else name
    base = base.split("(")[0]
    tokens = base.split("_")
    out: dict[str, object] = {"op": "gemm", "arch": _ARCH_BY_NAME.get(tokens[0], tokens[0])}
    mma = re.search(r"_([a-z])(\d{3,6})gemm", base)
    simt = re.search(r"_([a-z])gemm", base)
    explicit = next((_DTYPE_TOKENS[t] for t in tokens[1:] if t in _DTYPE_TOKENS), None)
    if mma:
        out["mma"] = mma.group(1) + mma.group(2)
        out["accumulate"] = _LETTER_DTYPE.get(mma.group(1), mma.group(1))
        out["dtype"] = explicit or _LETTER_DTYPE.get(mma.group(1))
    elif simt:
        out["mma"] = "simt"
        out["dtype"] = explicit or _LETTER_DTYPE.get(simt.group(1))
    tile = re.search(r"_(\d+)x(\d+)_", base + "_")
    if tile:
        out["tile"] = f"{tile.group(1)}x{tile.group(2)}"
    stages = re.search(r"stages_(\d+)x(\d+)", base)
    if stages:
        out["k_tile"], out["stages"] = int(stages.group(1)), int(stages.group(2))
    ldg = re.search(r"_ldg(\d+)", base)
    if ldg:
        out["ldg"] = int(ldg.group(1))
    sliced = re.search(r"sliced(\d+x\d+)", base)
    if sliced:
        out["sliced"] = sliced.group(1)
    if tokens[-1] in ("nn", "nt", "tn", "tt"):
        out["layout"] = tokens[-1]
    out["epilogue"] = _epilogue(tokens)
    return {k: v for k, v in out.items() if v is not None}


def decode_cutlass(name: str) -> dict:
    """CUTLASS 2.x names (``cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_32x6_tn_align8``, also
    inside ``cutlass::Kernel2<...>``), CUTLASS 3.x generated names (``cutlass3x_sm90_tensorop_gemm_...``)
    and templated ``cutlass::device_kernel<...GemmUniversal...>`` (arch only).

    In 2.x names the pair after the tile is ``<k_tile>x<stages>``; in 3.x ``<M>x<N>x<K>_<cluster>_<stages>``.
    """
    out: dict[str, object] = {"op": "gemm"}
    inner = re.search(r"cutlass3x_\w+|cutlass_\w*gemm\w*|cutlass_\w+", name)
    text = inner.group(0) if inner else name
    tokens = text.split("_")
    arch = re.match(r"cutlass_(\d{2,3})_", text)
    if arch:
        out["arch"] = f"sm{arch.group(1)}"
    else:
        # Templated CUTLASS 3 names mention several arch tags (`enable_3x_kernel_for_sm10<...Sm100...>`,
        # `SM90_TMA_LOAD` inside an Sm100 kernel): the newest one is the target.
        archs = [int(a) for a in re.findall(r"(?:Sm|SM|sm)(\d{2,3})(?!\d)", text if inner else name)]
        if archs:
            out["arch"] = f"sm{max(archs)}"
    for kind in ("wmma_tensorop", "tensorop", "simt", "wgmma", "umma"):
        if f"_{kind}_" in f"_{text}_":
            out["math"] = kind
            break
    mma = re.search(r"_([a-z])(\d{3,6})gemm", text)
    if mma:
        out["mma"] = mma.group(1) + mma.group(2)
    explicit = next((_DTYPE_TOKENS[t] for t in tokens if t in _DTYPE_TOKENS), None)
    if explicit is None and mma:
        explicit = _LETTER_DTYPE.get(mma.group(1))
    if explicit is None:
        simt = re.search(r"_([sdhc])gemm", text)
        explicit = _LETTER_DTYPE.get(simt.group(1)) if simt else None
    if explicit is None and not inner:
        if "bfloat16" in name:
            explicit = "bf16"
        elif "half_t" in name:
            explicit = "fp16"
    if explicit:
        out["dtype"] = explicit
    t3 = re.search(r"_(\d+)x(\d+)x(\d+)_(\d+x\d+x\d+)_(\d+)_", text + "_")
    t2 = re.search(r"_(\d+)x(\d+)_(\d+)x(\d+)_", text + "_")
    if t3:
        out["tile"] = f"{t3.group(1)}x{t3.group(2)}"
        out["k_tile"] = int(t3.group(3))
        out["cluster"] = t3.group(4)
        out["stages"] = int(t3.group(5))
    elif t2:
        out["tile"] = f"{t2.group(1)}x{t2.group(2)}"
        out["k_tile"], out["stages"] = int(t2.group(3)), int(t2.group(4))
    lay = next((t for t in tokens if re.fullmatch(r"[tn]{2,3}", t)), None)
    if lay:
        out["layout"] = lay
    align = re.search(r"align(\d+)", text)
    if align:
        out["align"] = int(align.group(1))
    out["epilogue"] = _epilogue(tokens)
    return out


_TENSILE_DTYPE = {"B": "bf16", "H": "fp16", "S": "fp32", "D": "fp64", "I8": "int8", "F8": "fp8", "B8": "fp8",
                  "F8B8": "fp8", "B8F8": "fp8", "X": "tf32", "4xi8": "int8", "I": "int32", "C": "complex64",
                  "Z": "complex128"}


def decode_tensile(name: str) -> dict:
    """``Cijk_Alik_Bljk_BBS_BH_MT128x128x64_MI32x32x8x1_SN_1LDSB0_...`` -> layout, dtype, tile, k_tile,
    instruction (MFMA), split_k (GSU), arch (ISA), epilogue.

    Index order gives the transposes: ``Ailk`` (A not transposed) / ``Alik`` (A transposed), ``Bljk`` (B not
    transposed) / ``Bjlk`` (B transposed), so ``Alik_Bljk`` is ``TN``. The type token lists A/B,
    destination and compute types (``BBS``: bf16 in, bf16 out, fp32 compute; ``HHS``; ``S``).
    """
    out: dict[str, object] = {"op": "gemm"}
    m = re.search(r"Cijk_A([a-z]{3})_B([a-z]{3})_([A-Z0-9]+)", name)
    if m:
        a, b, types = m.groups()
        out["layout"] = ("T" if a == "lik" else "N") + ("T" if b == "jlk" else "N")
        lead = re.match(r"(F8B8|B8F8|F8|B8|I8|[A-Z])", types)
        if lead:
            out["dtype"] = _TENSILE_DTYPE.get(lead.group(1), lead.group(1))
        out["types"] = types
    _set_tile(out, re.search(r"_MT(\d+)x(\d+)x(\d+)", name))
    mi = re.search(r"_MI(\d+x\d+x\d+)(?:x\d+)?", name)
    if mi:
        out["instruction"] = mi.group(1)
    gsu = re.search(r"_GSU(\d+)", name)
    if gsu:
        out["split_k"] = int(gsu.group(1)) > 1
    isa = re.search(r"_ISA(\d{3,4})", name)
    if isa:
        out["arch"] = f"gfx{isa.group(1)}"
    out["epilogue"] = "bias" if re.search(r"_Bias(SB)?_", name) else "none"
    return out


def decode_cublas_aux(name: str) -> dict:
    """cuBLAS helpers: ``gemv2T_kernel_val<...>`` (op gemv, layout T), ``gemmSN_TN_kernel`` (small-N gemm,
    layout TN), ``cublasLt::splitKreduce_kernel`` (op split_k_reduce)."""
    if "splitKreduce" in name:
        return {"op": "split_k_reduce"}
    if "epilogue::" in name:  # cuBLASLt's stand-alone epilogue pass (bias/activation after the GEMM)
        return {"op": "epilogue"}
    gemv = re.search(r"gemv2?([NT])?(?:SP)?_kernel|gemvx::kernel", name)
    if gemv:
        out: dict[str, object] = {"op": "gemv"}
        if gemv.group(1):
            out["layout"] = gemv.group(1)
        dt = _template_dtype(name)
        if dt:
            out["dtype"] = dt
        return out
    sn = re.search(r"gemmSN_([NT]{2})_kernel", name)
    if sn:
        out = {"op": "gemm", "variant": "small_n", "layout": sn.group(1)}
        dt = _template_dtype(name)
        if dt:
            out["dtype"] = dt
        return out
    if "reduce_1Block" in name:  # second stage of cuBLAS dot / nrm2 / asum
        return {"op": "dot_reduce"}
    if "gemmk1" in name:
        return {"op": "gemm", "variant": "k1"}
    if "dot_kernel" in name:
        return {"op": "dot"}
    return {"op": "blas"}


def _template_dtype(name: str) -> str | None:
    for needle, dt in (("__nv_bfloat16", "bf16"), ("BFloat16", "bf16"), ("__half", "fp16"), ("Half", "fp16"),
                       ("double", "fp64"), ("float", "fp32")):
        if needle in name:
            return dt
    return None


_CONV_ALGORITHMS = (("winograd", "winograd"), ("implicit_convolve", "implicit_convolve"),
                    ("explicit_convolve", "explicit_convolve"), ("fft", "fft"), ("direct", "direct"),
                    ("im2col_kernel", "im2col"), ("vol2col_kernel", "im2col"), ("col2im_kernel", "im2col"),
                    ("col2vol_kernel", "im2col"), ("col2im_batched", "im2col"), ("depthwise", "depthwise"))


def decode_conv(name: str) -> dict:
    """Convolution kernels (cuDNN, MIOpen, ATen's own): op conv plus an algorithm hint where the name gives one
    (ATen's ``im2col``/``vol2col``/``col2im`` unfolding -> im2col, ``conv_depthwise*`` -> depthwise)."""
    out: dict[str, object] = {"op": "conv"}
    for needle, algo in _CONV_ALGORITHMS:
        if needle in name:
            out["algorithm"] = algo
            break
    sm = re.search(r"sm(\d{2,3})", name)
    if sm:
        out["arch"] = f"sm{sm.group(1)}"
    return out


def decode_generic(name: str) -> dict:
    """Unknown GEMM-like kernels: only what is unambiguous (tile ``MxN`` if written, dtype hint)."""
    out: dict[str, object] = {"op": "gemv" if "gemv" in name.lower() else "gemm"}
    dt = _first_dtype(name) or _template_dtype(name)
    if dt:
        out["dtype"] = dt
    return out


_TRTLLM_DTYPES = {"E4m3": "fp8", "E5m2": "fp8", "E2m1": "fp4", "MxE4m3": "fp8", "MxE2m1": "fp4", "Bfloat16": "bf16",
                  "Fp16": "fp16", "Fp32": "fp32", "Int8": "int8", "Int4": "int4", "MxInt4": "int4"}


def decode_trtllm_gen(name: str) -> dict:
    """TensorRT-LLM generated GEMMs: ``bmm_E4m3_E4m3E4m3_Fp32_t128x8x128u2_s8_…_sm100f`` -> op (bmm/gemm),
    out_dtype (first token: the output type), tile ``MxN``, k_tile, stages, arch."""
    tokens = name.split("_")
    out: dict[str, object] = {"op": "batched_gemm" if tokens[0] == "bmm" else "gemm"}
    if len(tokens) > 1 and tokens[1] in _TRTLLM_DTYPES:
        out["out_dtype"] = _TRTLLM_DTYPES[tokens[1]]
    if len(tokens) > 2:
        first = re.match(r"(Mx)?(E\dm\d|Bfloat16|Fp16|Fp32|Int8|Int4)", tokens[2])
        if first:
            out["dtype"] = _TRTLLM_DTYPES.get((first.group(1) or "") + first.group(2), first.group(2))
    _set_tile(out, re.search(r"_t(\d+)x(\d+)x(\d+)", name))
    _set_int(out, "stages", re.search(r"_s(\d+)_", name))
    arch = re.search(r"_sm(\d{2,3})[a-z]?$", name)
    if arch:
        out["arch"] = f"sm{arch.group(1)}"
    return out


def decode_ck(name: str) -> dict:
    """Composable Kernel (demangled): op (conv / gemm / moe_gemm), the kernel ``template``, and whether the
    kernel is an XDL (MFMA) or WMMA one."""
    head = name[5:] if name.startswith("void ") else name
    head = head.replace("(anonymous namespace)::", "")
    end = min((p for p in (head.find("<"), head.find("(")) if p >= 0), default=len(head))
    template = head[:end].rsplit("::", 1)[-1]
    out: dict[str, object] = {"template": template}
    low = template.lower()
    out["op"] = "conv" if "conv" in low else "moe_gemm" if "moe" in low else "gemm"
    if "xdl" in low:
        out["instruction"] = "xdl"
    elif "wmma" in low:
        out["instruction"] = "wmma"
    return out
