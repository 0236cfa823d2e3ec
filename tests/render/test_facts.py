"""The report's facts read as a person would write them: identical devices counted once, a
process-group config summarised instead of printed as a Python list."""

from __future__ import annotations

from tracekit.render.views.tables import distributed_line


def test_a_process_group_config_is_summarised():
    # As the RTX 4090 tensor-parallel traces record it (distributedInfo of a 2-rank NCCL run).
    info = {"backend": "nccl", "rank": 0, "world_size": 2, "pg_count": 1, "nccl_version": "2.20.5",
            "pg_config": [{"pg_name": "0", "pg_desc": "default_pg", "backend_config": "cuda:nccl", "pg_size": 2,
                           "ranks": [0, 1]}]}
    assert distributed_line(info) == ("backend=nccl, nccl_version=2.20.5, process groups: default_pg (2 ranks), "
                                      "pg_count=1, rank=0, world_size=2")
    many = {"pg_config": [{"pg_name": str(i), "pg_size": 8} for i in range(300)]}
    assert distributed_line(many) == "process groups: 0 (8 ranks), 1 (8 ranks), 2 (8 ranks), +297 more"


def test_identical_devices_are_counted_once(sample):
    import dataclasses

    from tracekit.render.views.tables import facts_lines

    report = sample("mlp_eager").report()
    device = dict(report.facts.devices[0])
    facts = dataclasses.replace(report.facts, devices=(device,) * 8)
    lines = dict(facts_lines(dataclasses.replace(report, facts=facts)))
    assert lines["device"] == f"8 × {device['name']} (cc {device['compute_capability']}, {device['num_sms']} SMs)"
