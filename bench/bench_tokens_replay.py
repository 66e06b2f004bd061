"""Replay real DeepSeek runs through the learning estimator and compare estimates with the bill.

A benchmark, not a test: it prints figures, asserts nothing. Run it as
``python bench/bench_tokens.py`` (which calls :func:`main` here) or directly:

    python bench/bench_tokens_replay.py                       # all runs, tune/held-out split
    python bench/bench_tokens_replay.py --data DIR --warmup 5
    python bench/bench_tokens_replay.py --session             # through the Memory facade

Data: ``*.traj.json`` mini-swe-agent trajectories (default
``../shared/bench-data/deepseek-usage/``, or ``$AGENTMEM_DEEPSEEK_USAGE``). Each
assistant message carries the provider's response, whose ``usage`` is what
DeepSeek billed for the request that produced it; that request is every
message before it. Each run gets a fresh counter from
:func:`agentmem.tokens.counter_for_model` with the run's model name (what a
new session gets), and after each request the billed usage is fed back
through :func:`agentmem.llm.parse_usage` and ``observe`` -- what
``Session.record_usage(usage=...)`` does with the last payload.

Two estimates of every request, made *before* its bill is fed back:

* ``ratio``  -- the estimator before issue 18: :func:`count_messages` at the
  learned ratio and margin (what the context pipeline budgets with);
* ``anchor`` -- :meth:`LearningEstimator.estimate_payload`: the previous bill
  plus the new messages at the learned ratio, with the margin learned from
  its own residuals; the ratio estimate when the request does not extend
  the previous one.

Errors are ``billed / estimate - 1`` (positive = under-counted), over
requests after the first ``--warmup`` of each run. Runs are split by name:
the first ``--tune`` sorted runs were used to choose the constants in
``agentmem/tokens/anchor.py``; the others are reported as held out.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from agentmem.llm import parse_usage
from agentmem.tokens import LearningEstimator, count_messages, counter_for_model

_KEEP = ("role", "content", "tool_calls", "tool_call_id", "name")
_ROOT = Path(__file__).resolve().parents[1]
# The repository's sibling ``shared`` directory (a worktree sits one level deeper).
_CANDIDATES = [
    p / "shared" / "bench-data" / "deepseek-usage" for p in (_ROOT.parent, _ROOT.parents[1])
]
_DEFAULT = next((c for c in _CANDIDATES if c.is_dir()), _CANDIDATES[0])


def _clean(message: Mapping[str, Any]) -> dict[str, Any]:
    out = {k: message[k] for k in _KEEP if message.get(k) is not None}
    if "tool_calls" in out:
        out["tool_calls"] = [
            {"id": c.get("id"), "type": "function", "function": c.get("function")}
            for c in out["tool_calls"]
        ]
    return out


def requests(path: Path) -> tuple[str, list[tuple[list[dict[str, Any]], Any]]]:
    """The run's model name and its (request messages, usage) pairs, in order."""
    run = json.loads(path.read_text())
    model = str(run["info"]["config"]["model"]["model_name"])
    messages = run["messages"]
    out = []
    for i, message in enumerate(messages):
        response = (message.get("extra") or {}).get("response") or {}
        usage = response.get("usage")
        if message.get("role") == "assistant" and usage:
            out.append(([_clean(m) for m in messages[:i]], usage))
    return model, out


def replay(path: Path, warmup: int) -> dict[str, list[float]]:
    model, reqs = requests(path)
    counter = counter_for_model(model)
    if not isinstance(counter, LearningEstimator):
        raise SystemExit(f"{model}: counter_for_model gave {type(counter).__name__}")
    errors: dict[str, list[float]] = {"ratio": [], "anchor": []}
    for n, (sent, usage) in enumerate(reqs):
        billed = parse_usage(usage).prompt_tokens
        old = count_messages(sent, counter)
        new = counter.estimate_payload(sent)
        if n >= warmup and billed > 0:
            errors["ratio"].append(billed / old - 1.0)
            errors["anchor"].append(billed / new - 1.0)
        counter.observe(sent, billed)
    return errors


def replay_session(path: Path, warmup: int, root: Path) -> dict[str, list[float]]:
    """The same replay through the facade: a Memory session, ``context()``, ``record_usage``.

    The run's messages are appended to a session with the run's model name and
    a window large enough that no trim runs; each request is ``s.context()``
    (the session's own payload, which may add its framing to the run's
    messages), estimated by ``s.prompt_estimate()`` (anchored) and by the
    build's ``stats.tokens`` (the ratio count the window is budgeted with).
    ``decides`` is ``min(ratio, anchor)``: what the context pipeline's stage-1
    and stage-2 trim decisions and its budget cap use since issue 18 when the
    ratio count passes a threshold (the ratio alone after a trim).
    """
    from agentmem import Memory

    model, reqs = requests(path)
    errors: dict[str, list[float]] = {"ratio": [], "anchor": [], "decides": []}
    mem = Memory(root=root / path.stem, working_dir=root)
    with mem.session(model=model, context_window=10_000_000) as s:
        seen = 0
        for n, (sent, usage) in enumerate(reqs):
            for message in sent[seen:]:
                if message["role"] == "system":
                    s.history.replace_system_prompt(str(message["content"]))
                elif message["role"] == "user" and n == 0 and seen == 0 and not s.open_task_id:
                    s.start_task(str(message["content"]))
                else:
                    s.append(message)
            seen = len(sent)
            s.context()
            build = s.context_manager.last_build
            assert build is not None
            billed = parse_usage(usage).prompt_tokens
            new = s.prompt_estimate()
            assert new is not None
            old = build.stats.tokens + build.stats.tool_tokens
            if n >= warmup and billed > 0:
                errors["ratio"].append(billed / old - 1.0)
                errors["anchor"].append(billed / new - 1.0)
                errors["decides"].append(billed / min(old, new) - 1.0)
            s.record_usage(usage=usage)
    return errors


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def report(label: str, errors: dict[str, list[float]]) -> None:
    n = len(errors["ratio"])
    print(f"\n{label}: {n} requests")
    print(f"{'':8} {'p50 |e|':>8} {'p95 |e|':>8} {'p99 |e|':>8} {'under>2%':>9} {'mean over':>10}")
    for name, values in errors.items():
        absolute = [abs(e) for e in values]
        under = sum(e > 0.02 for e in values) / max(1, len(values))
        # Room given back: how much larger than the bill the estimate is, on average.
        over = statistics.fmean(1.0 / (1.0 + e) - 1.0 for e in values) if values else 0.0
        print(
            f"{name:8} {_quantile(absolute, 0.5):>8.2%} {_quantile(absolute, 0.95):>8.2%}"
            f" {_quantile(absolute, 0.99):>8.2%} {under:>9.2%} {over:>10.2%}"
        )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default = os.environ.get("AGENTMEM_DEEPSEEK_USAGE", str(_DEFAULT))
    parser.add_argument("--data", type=Path, default=Path(default))
    parser.add_argument("--warmup", type=int, default=5, help="requests per run not scored")
    parser.add_argument("--tune", type=int, default=8, help="sorted runs used for tuning")
    parser.add_argument(
        "--session", action="store_true", help="replay through Memory sessions (the facade)"
    )
    args = parser.parse_args(argv)
    paths = sorted(args.data.glob("*.traj.json"))
    if not paths:
        raise SystemExit(f"no *.traj.json under {args.data}")
    names = ("ratio", "anchor", "decides") if args.session else ("ratio", "anchor")
    groups: dict[str, dict[str, list[float]]] = {
        "tuned on": {name: [] for name in names},
        "held out": {name: [] for name in names},
    }
    with tempfile.TemporaryDirectory() as tmp:
        for i, path in enumerate(paths):
            group = groups["tuned on" if i < args.tune else "held out"]
            if args.session:
                result = replay_session(path, args.warmup, Path(tmp))
            else:
                result = replay(path, args.warmup)
            for name, values in result.items():
                group[name].extend(values)
    print(f"{len(paths)} runs from {args.data}; error e = billed/estimate - 1 (e > 0: under)")
    held = len(paths) - args.tune
    print(f"tuned on: the first {args.tune} runs by name; held out: the other {held}")
    print("tuned on:", ", ".join(p.name.removesuffix(".traj.json") for p in paths[: args.tune]))
    print("held out:", ", ".join(p.name.removesuffix(".traj.json") for p in paths[args.tune :]))
    for label, errors in groups.items():
        report(label, errors)
        if args.session and errors["ratio"]:
            # The window room a trim decision gets back: how much smaller the deciding
            # estimate is than the ratio count, as a share of the bill, on average.
            given = statistics.fmean(
                1.0 / (1.0 + r) - 1.0 / (1.0 + d)
                for r, d in zip(errors["ratio"], errors["decides"], strict=True)
            )
            print(f"{'':8} window room given back to the trim decisions: {given:.2%} of the bill")


if __name__ == "__main__":
    main()
