"""CPU cost per episode: castdata's environment vs the benchmark's own loop (tau-trait's `Env.step` +
`calculate_reward`; for a `tau2-*` domain, tau2's `Environment.get_response` + `evaluate_simulation`).

Both run the same gold-replay episodes (every gold tool call, then the reward). castdata loads the data
once per process and compares copy-on-write record fingerprints against a cached gold state; tau-trait
re-reads the JSON and hashes the whole database twice per episode; tau2 builds a fresh environment from its
data files per episode and its evaluator replays the episode in two more (predicted and gold).

    python benchmarks/bench_episodes.py [--domain retail|tau2-retail] [--split test] [--tasks 60]
"""

from __future__ import annotations

import argparse
import asyncio
import time

from castdata.envs import load_domain
from castdata.envs.clock import episode_clock
from castdata.envs.reference import tau_trait_env, tau_trait_reward
from castdata.models.scripted import ScriptedBackend
from castdata.models.spec import ModelSpec
from castdata.rollout.episode import run_episode


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--domain", default="retail")
    parser.add_argument("--split", default="test")
    parser.add_argument("--tasks", type=int, default=60)
    args = parser.parse_args()

    domain = load_domain(args.domain)
    tasks = domain.tasks(args.split)[: args.tasks]
    said = {t.index: [" ".join(t.outputs)] for t in tasks}

    def gold_episode(task):
        db = domain.new_database(task)
        with episode_clock():
            for requestor, action in domain.gold_calls(task):
                domain.execute(db, action.name, action.kwargs, requestor)
        return db

    def castdata_pass() -> tuple[list[float], float]:
        start = time.process_time()
        rewards = [domain.score(t, gold_episode(t), said[t.index]).reward for t in tasks]
        return rewards, (time.process_time() - start) / len(tasks)

    castdata_rewards, cold_cpu = castdata_pass()  # computes and caches each task's gold state
    _, castdata_cpu = castdata_pass()

    spec = ModelSpec()
    backend = ScriptedBackend(spec)

    async def full_loop() -> list[float]:
        return [
            (await run_episode(domain, t, 0, 0, backend, backend, spec, spec, max_steps=60)).outcome.reward
            for t in tasks
        ]

    start = time.process_time()
    loop_rewards = asyncio.run(full_loop())
    loop_cpu = (time.process_time() - start) / len(tasks)

    if args.domain.startswith("tau2-"):
        from castdata.envs.tau2_reference import evaluate, tau2_episode

        evaluate(domain.short, domain.source(tasks[0]), [])  # import tau2's evaluator (and litellm) outside the timing
        reference = "tau2 get_response + evaluate_simulation"
        start = time.process_time()
        tau_rewards = [
            tau2_episode(domain.short, domain.source(t), domain.gold_calls(t), said[t.index][0]) for t in tasks
        ]
    else:
        env = tau_trait_env(args.domain, args.split)
        reference = "tau-trait Env.step + calculate_reward"
        start = time.process_time()
        tau_rewards = [
            tau_trait_reward(
                env, t.index, [(a.name, a.kwargs) for a in t.actions if a.name != "respond"], said[t.index]
            )
            for t in tasks
        ]
    tau_cpu = (time.process_time() - start) / len(tasks)

    assert castdata_rewards == tau_rewards, "castdata and the benchmark's own loop disagree on a reward"
    print(
        f"{args.domain}/{args.split}: {len(tasks)} gold-replay episodes, rewards identical ({sum(tau_rewards):.0f} of {len(tasks)} = 1)"
    )
    print(f"{'':42s}{'CPU ms/episode':>16s}{'x cheaper':>12s}")
    print(f"{reference:42s}{tau_cpu * 1e3:16.2f}{1.0:12.1f}")
    print(f"{'castdata tools + reward, first episode':42s}{cold_cpu * 1e3:16.2f}{tau_cpu / cold_cpu:12.1f}")
    print(f"{'castdata tools + reward, later episodes':42s}{castdata_cpu * 1e3:16.2f}{tau_cpu / castdata_cpu:12.1f}")
    print(f"{'castdata full episode (scripted models)':42s}{loop_cpu * 1e3:16.2f}{tau_cpu / loop_cpu:12.1f}")
    print(
        f"(full-episode rewards: {sum(loop_rewards):.0f} of {len(tasks)}; 'first episode' includes computing the task's gold state once)"
    )


if __name__ == "__main__":
    main()
