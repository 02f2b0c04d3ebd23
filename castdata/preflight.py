"""`castdata validate CONFIG.yaml`: every check a run makes before it writes anything, and nothing else.

The keys (with file, line and column), the task selection, each model spec (options, the key's variable), the
`label:` section, and, with `probe`, each endpoint (`castdata.models.probe`) and the Hub token of `publish:`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from pathlib import Path

import yaml

from castdata.config import CollectConfig, PipelineConfig, load_config, read_text
from castdata.errors import ConfigError

EVAL_KEYS = frozenset({"critic", "guard", "max_revisions"})
PIPELINE_KEYS = frozenset({"label", "build", "publish"})  # a guarded pipeline config is no eval config


def validate_config(path: Path, overrides: Iterable[str] = (), *, probe: bool = False) -> str:
    """Check a pipeline, collect or eval config (an eval config has `critic`, `guard` or `max_revisions`);
    returns a one-line summary, or raises the first problem as a `UserError`."""
    from castdata.label.run import load_label_config
    from castdata.models.probe import probe_endpoints
    from castdata.pipeline import check_later_stages
    from castdata.rollout.collect import plan_episodes

    keys = _top_keys(Path(path))
    is_eval = bool(EVAL_KEYS & keys) and not (PIPELINE_KEYS & keys)
    if is_eval:
        from castdata.critic.eval_policy import EvalConfig

        config: CollectConfig = load_config(path, EvalConfig, overrides)
    else:
        config = load_config(path, PipelineConfig, overrides)
        label_config = load_label_config(path, overrides)
    episodes = len(plan_episodes(config))
    asyncio.run(_open_and_close(config))
    if probe:
        asyncio.run(probe_endpoints(config.endpoints()))
        if not is_eval:
            check_later_stages(config, label_config)
    kind = "eval" if is_eval else "pipeline"
    checked = "keys, tasks, model specs" + (", endpoints" if probe else "")
    return f"ok: {path} ({kind} config): {episodes} episodes of {', '.join(config.domains)}; checked {checked}"


def _top_keys(path: Path) -> set[str]:
    """The top-level keys of a config (none when it cannot be read: `load_config` then says why)."""
    try:
        raw = yaml.safe_load(read_text(path))
    except (ConfigError, yaml.YAMLError):
        return set()
    return set(raw) if isinstance(raw, dict) else set()


async def _open_and_close(config: CollectConfig) -> None:
    """Open (and close) the run's backends: each checks its spec as a run would."""
    from castdata.models import open_backend
    from castdata.rollout.collect import open_agent

    for backend in (open_agent(config), open_backend(config.user, "user"), config.open_judge()):
        if backend is not None:
            await backend.aclose()
