"""Fuzz every command with hostile inputs, for runs longer than the test suite's.

Two modes, both running each input through report, convert, diff and check (``tests/hostile.py``'s
quick matrix, in this process) and checking that each ends in a report, a broken expectation or
one line and exit 2 — never a traceback, an internal error (exit 3), a hang or a crash:

    python bench/fuzz.py --iterations 2000 --seed 7      # random mutations of real traces (no extra package)
    python bench/fuzz.py --atheris -max_total_time=600    # coverage-guided, needs `pip install atheris`

In random mode each input is a list of :func:`hostile.random_mutations` applied to a real trace
(``tests/hostile.py`` SEEDS); every few inputs the JSON text itself is cut short, gzipped or given a
NaN literal. With ``--atheris`` the fuzzer's bytes choose the mutations (and sometimes are the
trace file itself) and coverage steers them; without atheris installed that mode says so and exits
0. The process runs under an address-space limit (``--memory``, default 4 GiB) and each input under a
time limit (``--timeout``); a failing input is written to ``--out`` (default
``/tmp/tracekit-fuzz``) with the problem, and the run exits 1.
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
import resource
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests"), str(ROOT)]

import hostile  # noqa: E402


class Hang(Exception):
    """An input ran past ``--timeout``."""


def _alarm(signum, frame):  # noqa: ARG001
    raise Hang()


def check(data: bytes, timeout: int) -> list[str]:
    """Problems of running every command on ``data`` as a trace (empty: all outcomes defined)."""
    workdir = Path(tempfile.mkdtemp(prefix="tracekit-fuzz-"))
    case = hostile.Case("fuzz", {"t.json": data})
    try:
        hostile.write_case(case, workdir)
        signal.alarm(timeout)
        try:
            results = hostile.run_matrix(case, workdir, quick=True)
        except Hang:
            return [f"no outcome within {timeout} s (a hang)"]
        finally:
            signal.alarm(0)
        return hostile.check_outcomes(case, results)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def text_damage(data: bytes, rng: random.Random) -> bytes:
    """Damage to the text itself: cut short, gzipped (whole or cut), a NaN literal, trailing junk."""
    kind = rng.choice(("cut", "gzip", "gzip_cut", "nan", "junk"))
    if kind == "cut":
        return data[: rng.randrange(1, len(data))]
    if kind == "gzip":
        return gzip.compress(data)
    if kind == "gzip_cut":
        packed = gzip.compress(data)
        return packed[: rng.randrange(1, len(packed))]
    if kind == "nan":
        return data.replace(b'"dur": ', b'"dur": NaN, "x": ', 1)
    return data + rng.choice((b"x", b"]", b"}{", b"\x00" * 8))


def save(out: Path, n: int, data: bytes, problems: list[str]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / f"input_{n}.json").write_bytes(data)
    (out / f"input_{n}.problems.txt").write_text("\n".join(problems) + "\n")


def random_mode(args: argparse.Namespace) -> int:
    rng = random.Random(args.seed)
    seeds = {name: hostile.seed(name) for name in hostile.SEEDS}
    failed = 0
    started = time.monotonic()
    for n in range(args.iterations):
        name = rng.choice(sorted(seeds))
        doc = json.loads(json.dumps(seeds[name]))
        hostile.mutate(doc, hostile.random_mutations(rng, rng.randint(1, 8)))
        data = hostile.dumps(doc)
        if rng.random() < 0.2:
            data = text_damage(data, rng)
        problems = check(data, args.timeout)
        if problems:
            failed += 1
            save(args.out, n, data, problems)
            print(f"input {n}: {problems[0][:300]}", flush=True)
        if (n + 1) % 50 == 0:
            print(f"{n + 1} inputs, {failed} failing, {time.monotonic() - started:.0f} s", flush=True)
    print(f"{args.iterations} inputs, {failed} failing" + (f" (saved in {args.out})" if failed else ""))
    return 1 if failed else 0


def atheris_mode(args: argparse.Namespace, rest: list[str]) -> int:
    try:
        import atheris  # type: ignore[import-not-found]
    except ImportError:
        print("atheris is not installed (pip install atheris): coverage-guided fuzzing skipped")
        return 0
    with atheris.instrument_imports():
        import tracekit.load  # noqa: F401
        import tracekit.results.report  # noqa: F401

    seeds = {name: hostile.seed(name) for name in hostile.SEEDS}
    count = [0]

    def one_input(raw: bytes) -> None:
        provider = atheris.FuzzedDataProvider(raw)
        if provider.ConsumeBool():
            data = provider.ConsumeBytes(1 << 20)  # the bytes are the trace file
        else:
            doc = json.loads(json.dumps(seeds[sorted(seeds)[provider.ConsumeIntInRange(0, len(seeds) - 1)]]))
            rng = random.Random(provider.ConsumeInt(8))
            hostile.mutate(doc, hostile.random_mutations(rng, provider.ConsumeIntInRange(1, 8)))
            data = hostile.dumps(doc)
        problems = check(data, args.timeout)
        count[0] += 1
        if problems:
            save(args.out, count[0], data, problems)
            raise RuntimeError(problems[0][:500])

    atheris.Setup([sys.argv[0], *rest], one_input)
    atheris.Fuzz()
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=200, help="inputs in random mode")
    parser.add_argument("--seed", type=int, default=0, help="random mode's seed (runs are repeatable)")
    parser.add_argument("--atheris", action="store_true", help="coverage-guided with atheris (rest: its args)")
    parser.add_argument("--memory", type=int, default=4 << 30, help="address-space limit, bytes")
    parser.add_argument("--timeout", type=int, default=60, help="seconds per input")
    parser.add_argument("--out", type=Path, default=Path(tempfile.gettempdir()) / "tracekit-fuzz")
    args, rest = parser.parse_known_args()
    resource.setrlimit(resource.RLIMIT_AS, (args.memory, resource.getrlimit(resource.RLIMIT_AS)[1]))
    signal.signal(signal.SIGALRM, _alarm)
    return atheris_mode(args, rest) if args.atheris else random_mode(args)


if __name__ == "__main__":
    sys.exit(main())
