"""The link between the host and a GPU: the bandwidth a pinned host↔device copy reaches on it.

Contract: :func:`link_for` takes a device name as the trace's ``deviceProperties`` writes it
(``"NVIDIA H200"``, ``"Tesla V100-SXM2-32GB"``, ``"NVIDIA GeForce RTX 2080 Ti"``…) and its compute
capability (``"9.0"``, or None) and returns a :class:`HostLink` (the link's name, the bytes per
second a pinned copy reaches in one direction, and why), or None when neither names a known link.
The name is matched first against :data:`LINKS` (ordered, first match wins); a device the table does
not name falls back on its compute capability (:data:`BY_COMPUTE_CAPABILITY`), the link generation
each architecture shipped with.

Figures are what a pinned ``cudaMemcpyAsync`` reaches in practice (``bandwidthTest`` /
``nvbandwidth`` host-to-device), not the link's raw rate: PCIe x16 moves 15.75 GB/s (Gen3), 31.5
(Gen4) and 63 (Gen5) per direction before protocol overhead, and a pinned copy reaches about 80 % of
it. A pageable copy goes through the driver's staging buffer at a fraction of that.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

GB = 1e9

#: PCIe Gen3 x16: 15.75 GB/s raw per direction; pinned copies reach 12–13 GB/s (V100, T4, RTX 20xx).
PCIE_GEN3_X16 = 12.5 * GB
#: PCIe Gen4 x16: 31.5 GB/s raw; pinned copies reach 24–26 GB/s (A100, RTX 30xx/40xx, MI200).
PCIE_GEN4_X16 = 25.0 * GB
#: PCIe Gen5 x16: 63 GB/s raw; pinned copies reach 50–55 GB/s (H100/H200, B200, MI300X; the H200 sample
#: captures' pinned 32 MiB batch copies run at 55 GB/s).
PCIE_GEN5_X16 = 50.0 * GB
#: NVLink-C2C between a Grace CPU and its GPU (GH200, GB200, GB10): 900 GB/s both ways on GH200, 450
#: one way; copies reach less, so a saving priced against it is an upper bound.
NVLINK_C2C = 450.0 * GB


@dataclass(frozen=True)
class HostLink:
    """A host↔device link: ``name``, ``bytes_per_s`` (a pinned copy, one direction), ``reason``."""

    name: str
    bytes_per_s: float
    reason: str


def _link(name: str, rate: float, reason: str) -> HostLink:
    return HostLink(name=name, bytes_per_s=rate, reason=reason)


_GEN3 = _link("PCIe Gen3 x16", PCIE_GEN3_X16, "pinned copies reach ~12.5 GB/s of 15.75")
_GEN4 = _link("PCIe Gen4 x16", PCIE_GEN4_X16, "pinned copies reach ~25 GB/s of 31.5")
_GEN5 = _link("PCIe Gen5 x16", PCIE_GEN5_X16, "pinned copies reach ~50 GB/s of 63")
_C2C = _link("NVLink-C2C", NVLINK_C2C, "Grace-Hopper/Blackwell superchip, 450 GB/s one way")

#: Device name pattern → its host link; ordered, the first match wins (superchips before the GPU
#: they contain: "GH200" holds "H200").
LINKS: tuple[tuple[re.Pattern[str], HostLink], ...] = tuple((re.compile(p, re.IGNORECASE), link) for p, link in (
    (r"GH200|GB200|GB300|GB10\b", _C2C),
    (r"H100|H200|H800|H20\b|B200|B300|B100|RTX PRO 6000|RTX 50\d\d|MI300|MI325|MI350|MI355", _GEN5),
    (r"A100|A800|A30\b|A40\b|A10G?\b|A16\b|A2\b|L4\b|L40|RTX A\d{4}|RTX \d000 Ada|RTX 30\d\d|RTX 40\d\d|"
     r"MI100|MI210|MI250|RX 6\d{3}|RX 7\d{3}", _GEN4),
    (r"V100|T4\b|P100|P40\b|P4\b|Titan V|Titan RTX|RTX 20\d\d|GTX 16\d\d|GTX 10\d\d|Quadro RTX|MI50|MI60", _GEN3),
))
#: NVIDIA compute capability major → the link its architecture shipped with (Pascal and Volta/Turing
#: Gen3, Ampere and Ada Gen4, Hopper and Blackwell Gen5), for a device the name table does not know.
BY_COMPUTE_CAPABILITY = {6: _GEN3, 7: _GEN3, 8: _GEN4, 9: _GEN5, 10: _GEN5, 12: _GEN5}


def link_for(device_name: str, compute_capability: str | None = None) -> HostLink | None:
    """The host link of the GPU ``device_name`` (compute capability ``compute_capability``, e.g.
    ``"8.0"``), or None when neither is known (module docstring)."""
    for pattern, link in LINKS:
        if device_name and pattern.search(device_name):
            return link
    major = (compute_capability or "").partition(".")[0]
    return BY_COMPUTE_CAPABILITY.get(int(major)) if major.isdigit() else None
