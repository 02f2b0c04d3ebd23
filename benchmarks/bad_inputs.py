"""Every bad input tried on the command line, with the message and exit code each gets (`benchmarks/README.md`).

    python benchmarks/bad_inputs.py            # prints the Markdown table

Each case runs `castdata` in this process (typer's runner) in a fresh folder, against a loopback
OpenAI-compatible server where it needs one; `tests/test_bad_inputs.py` checks every row: one line, the exit
code, no traceback, no file written, and the key never shown.
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

KEY_ENV = "CASTDATA_BAD_INPUT_KEY"
KEY = "live-key.Zq81-not-sk-shaped"  # what the loopback server wants; never shown
WRONG_KEY = "wrong-key.Pz66-also-secret"
OUT = "out"  # every case's run directory: nothing may appear there


def base(**changes) -> dict:
    """A small valid collect config (scripted models), with `changes` merged in at the top level."""
    return {"domains": ["retail"], "split": "test", "tasks": "0-1", "trials": 1, "out": OUT, **changes}


def openai_agent(url: str, **changes) -> dict:
    return {
        "backend": "openai",
        "model": "test-model",
        "base_url": url,
        "api_key_env": KEY_ENV,
        "max_retries": 1,
        "timeout_s": 5,
        **changes,
    }


@dataclass(frozen=True)
class Case:
    """One bad input: what is wrong, the `castdata` arguments (`{config}`, `{url}`, `{dir}` filled in), the
    config file's content (a mapping, text, or bytes), and the environment it runs with."""

    name: str
    args: tuple[str, ...]
    config: dict | str | bytes | None = None
    env: dict[str, str | None] = field(default_factory=dict)
    exit_code: int = 2


def cases() -> list[Case]:
    """Every case, in the order of the table."""
    collect = ("collect", "{config}", "--quiet")
    return [
        Case("config file missing", ("collect", "{dir}/nothere.yaml")),
        Case("config is a directory", ("collect", "{dir}")),
        Case("config is not UTF-8", collect, b"domains: [retail]\n# caf\xe9\n"),
        Case("YAML syntax error", collect, "domains: [retail\ntrials: 2\n"),
        Case("YAML bad indentation", collect, "agent:\n  backend: openai\n model: x\n"),
        Case("config is a list, not a mapping", collect, "- retail\n- airline\n"),
        Case("unknown top-level key (typo)", collect, base(trails=2)),
        Case("unknown nested key (typo)", collect, base(agent={"sampling": {"temprature": 0.5}})),
        Case("wrong value type", collect, base(trials="four")),
        Case("value out of range", collect, base(trials=0)),
        Case("unknown domain", collect, base(domains=["retial"])),
        Case("split the domain lacks", collect, base(domains=["airline"], split="train")),
        Case("task id out of range", collect, base(tasks=[0, 999])),
        Case("malformed task range", collect, base(tasks="1..3")),
        Case("unknown backend", collect, base(agent={"backend": "anthropic"})),
        Case("typo in agent.options.mistakes", collect, base(agent={"options": {"mistakes": {"wrong_argumnt": 0.1}}})),
        Case(
            "typo in agent.options (openai)", collect, base(agent=openai_agent("{url}", options={"retry_backof_s": 1}))
        ),
        Case("typo in user.options", collect, base(user={"model": "scripted-user", "options": {"trait": {}}})),
        Case("base_url is not a URL", collect, base(agent=openai_agent("not a url"))),
        Case("base_url: nothing listens", collect, base(agent=openai_agent("http://127.0.0.1:9/v1"))),
        Case("base_url: unknown host", collect, base(agent=openai_agent("http://no-such-host.invalid/v1"))),
        Case(
            "api_key_env names an unset variable",
            collect,
            base(agent=openai_agent("{url}", api_key_env="NO_SUCH_KEY_VAR")),
        ),
        Case(
            "wrong key (401, key quoted in the body)", collect, base(agent=openai_agent("{url}")), {KEY_ENV: WRONG_KEY}
        ),
        Case("no api_key_env, server wants a key (401)", collect, base(agent=openai_agent("{url}", api_key_env=None))),
        Case("--set without '='", ("collect", "{config}", "--set", "trials"), base()),
        Case("--set of an unknown key", ("collect", "{config}", "--set", "trails=2"), base()),
        Case("--set of a bad value", ("run", "{config}", "--set", "concurrency=-1"), base()),
        Case(
            "eval config: unknown guard",
            ("eval", "{config}"),
            base(critic={"backend": "scripted", "model": "replay-critic"}, guard="everything"),
        ),
        Case("eval-critic config without a critic", ("eval-critic", "{config}", "{dir}"), base()),
        Case("validate: typo", ("validate", "{config}"), base(agent={"modle": "x"})),
        Case("report on a missing run directory", ("report", "{dir}/no-run")),
        Case("label a folder that is no run", ("label", "{dir}")),
        Case("build from a folder that is no run", ("build", "{dir}", "--out", "{dir}/" + OUT)),
        Case("publish: not a semantic version", ("publish", "{dir}", "--repo", "org/name", "--version", "1.0")),
        Case(
            "publish: no Hub token",
            ("publish", "{dir}", "--repo", "org/name", "--version", "1.0.0"),
            env={"HF_TOKEN": None, "HF_TOKEN_PATH": "{dir}/no-token"},
        ),
        Case("download: bad repo id", ("download", "not a repo", "--version", "1.0.0")),
        Case("--limit 0", ("collect", "{config}", "--limit", "0"), base()),
        Case("--limit that is no number", ("run", "{config}", "--limit", "ten"), base()),
        Case("eval-critic --limit below 1", ("eval-critic", "{config}", "{dir}", "--limit", "-5"), base()),
        Case(
            "import: negative --trial-offset",
            ("import", "tau-bench", "{dir}/r.json", "--out", OUT, "--domain", "retail", "--trial-offset", "-1"),
        ),
        Case("unknown option (typo)", ("collect", "{config}", "--limt", "2"), base()),
        Case("option without its value", ("collect", "{config}", "--out"), base()),
        Case("missing argument", ("collect",)),
        Case("unknown command", ("colect", "{config}"), base()),
    ]


@dataclass(frozen=True)
class Result:
    exit_code: int
    output: str
    traceback: bool
    written: list[str]


def run_case(case: Case, url: str) -> Result:
    """Run one case in a fresh folder; what it printed, its exit code, and the files it left there."""
    from typer.testing import CliRunner

    from castdata.cli import app

    with tempfile.TemporaryDirectory() as tmp, _cwd(tmp), _env({KEY_ENV: KEY, **case.env}, tmp):
        folder = Path(tmp)
        fill = {"config": str(folder / "config.yaml"), "url": url, "dir": tmp}
        if case.config is not None:
            _write(folder / "config.yaml", case.config, fill)
        before = set(folder.rglob("*"))
        result = CliRunner().invoke(app, [arg.format(**fill) for arg in case.args], prog_name="castdata")
        written = sorted(str(p.relative_to(folder)) for p in set(folder.rglob("*")) - before)
        failed = result.exception is not None and not isinstance(result.exception, SystemExit)
        return Result(result.exit_code, result.output.strip().replace(tmp, "DIR"), failed, written)


def _write(path: Path, content: dict | str | bytes, fill: dict[str, str]) -> None:
    if isinstance(content, bytes):
        path.write_bytes(content)
        return
    text = content if isinstance(content, str) else yaml.safe_dump(content, sort_keys=False)
    path.write_text(text.replace("'{url}'", fill["url"]).replace("{url}", fill["url"]))


@contextmanager
def _cwd(path: str) -> Iterator[None]:
    before = os.getcwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(before)


@contextmanager
def _env(changes: dict[str, str | None], tmp: str) -> Iterator[None]:
    saved = dict(os.environ)
    for name, value in changes.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value.replace("{dir}", tmp)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


@contextmanager
def loopback_server() -> Iterator[str]:
    """A loopback OpenAI-compatible server that wants `KEY`; yields its base URL."""
    from helpers.openai_server import ChatServer, FaultPlan

    with ChatServer(lambda body: {"content": "hello"}, FaultPlan(api_key=KEY)) as server:
        yield server.base_url


def table(run: Callable[[Case], Result]) -> str:
    """The Markdown table of every case."""
    lines = ["| # | bad input | exit | message |", "|---|---|---|---|"]
    for number, case in enumerate(cases(), start=1):
        result = run(case)
        message = result.output.replace("|", "\\|").replace("\n", " / ")
        lines.append(f"| {number} | {case.name} | {result.exit_code} | `{message}` |")
    return "\n".join(lines)


def main() -> None:
    with loopback_server() as url:
        print(table(lambda case: run_case(case, url)))


if __name__ == "__main__":
    main()
