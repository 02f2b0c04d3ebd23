"""The command line stays fast: `castdata --help` imports neither tau-trait nor the ML stack."""

from __future__ import annotations

import subprocess
import sys


def test_help_is_lazy():
    code = (
        "import sys; from castdata.cli import app; mods = set(sys.modules); "
        "print(sorted(m for m in ('litellm', 'tau_trait', 'datasets', 'torch', 'polars', 'openai') if m in mods))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr
    shown = subprocess.run([sys.executable, "-m", "castdata.cli", "--help"], capture_output=True, text=True, timeout=60)
    assert shown.returncode == 0 and "collect" in shown.stdout and "report" in shown.stdout


def test_a_bad_option_value_is_one_line_from_the_console_entry_point(tmp_path):
    """The installed command (not typer's test runner): `--limit 0` is one line naming the option, exit 2, no box."""
    out = subprocess.run(
        [sys.executable, "-m", "castdata.cli", "collect", str(tmp_path / "c.yaml"), "--limit", "0"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 2 and out.stdout == "", out.stdout + out.stderr
    assert out.stderr.splitlines() == [
        "error: --limit: Input should be greater than or equal to 1 (see `castdata collect --help`)"
    ]
    assert list(tmp_path.iterdir()) == []
    bare = subprocess.run([sys.executable, "-m", "castdata.cli"], capture_output=True, text=True, timeout=60)
    assert bare.returncode == 2 and "collect" in bare.stdout + bare.stderr  # no arguments: the help, as before


def test_ci_runs_exactly_the_readme_test_command():
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    readme = (root / "README.md").read_text()
    (command,) = [line for line in readme.splitlines() if line.startswith("python3 -m venv") and "-m pytest" in line]
    assert command.startswith("python3 -m venv .venv && .venv/bin/pip install torch==2.13.0 && ")
    assert command in (root / ".ci" / "run").read_text().splitlines()
