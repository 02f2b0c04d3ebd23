"""`castdata view`: the page of a small labelled demo run, checked as data and in a real headless Chromium."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from helpers.browser import BROWSER_ARGS, CHROMIUM
from helpers.build import demo_config, labelled_run
from typer.testing import CliRunner

from castdata.cli import app
from castdata.label.run import read_labels
from castdata.rundir import RunDir, read_trajectories
from castdata.view import write_view

ARTIFACTS = Path(__file__).resolve().parent / "artifacts"
PLANTED = "<script>window.__planted = 'message'</script><img src=x onerror=\"window.__planted = 'img'\">"
PLANTED_MODEL = "noisy</script><script>window.__planted = 'index'</script>"
PLANTED_RATIONALE = "</script><b onmouseover=\"window.__planted = 'label'\">bold?</b>"
PLANTED_EPISODE = "retail.test.0.0"
CRITIQUE = "The item ids are not the ones the user confirmed."
FLAGGED = "retail.test.3.0"  # marked as imported, and its labels as the simulated user's fault
CHOSEN: dict = {}  # the fixture's failed episode: its id, first critical error's step and the next labelled step


def _edit_jsonl(path: Path, edit) -> None:
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    path.write_text("".join(json.dumps(edit(record) or record) + "\n" for record in lines))


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    """A labelled demo run (8 retail test episodes, frequent wrong arguments) with `<script>` planted in a message, a model name and a
    rationale, a critic's interception of the first critical error (as `castdata eval` records them), and
    one episode marked as imported with labels that blame the simulated user."""
    folder = tmp_path_factory.mktemp("view") / "run"
    agent = demo_config().agent.model_copy(update={"options": {"mistakes": {"wrong_argument": 0.4}}})
    root = labelled_run(folder, split="test", tasks="0-3", trials=2, domains=["retail"], agent=agent)
    for episode, labels in read_labels(root).items():  # the first failed episode whose first error has a correction
        first = next((label for label in labels if label.first_critical_error and label.expected_action), None)
        later = [label.step for label in labels if first is not None and label.step > first.step]
        if episode not in (PLANTED_EPISODE, FLAGGED) and first is not None and later:
            CHOSEN.update(failed=episode, step=first.step, after=later[0], category=first.categories[0])
            break
    failed, step = CHOSEN["failed"], CHOSEN["step"]

    def plant_trajectory(record):
        if record["id"] == PLANTED_EPISODE:
            record["messages"][1]["content"] = PLANTED
            record["agent"]["model"] = PLANTED_MODEL
        if record["id"] == FLAGGED:
            record["imported"] = {
                "format": "tau-bench",
                "file": "results.json",
                "sha256": "0" * 64,
                "index": 0,
                "source_task_id": 3,
                "source_trial": 0,
                "source_reward": 1.0,
                "task_match": "same",
                "reproduced": True,
            }
        if record["id"] == failed:
            proposed = record["messages"][step]
            CHOSEN["proposed"] = (
                proposed["tool_calls"][0]["function"]["name"] + "("
                if proposed.get("tool_calls")
                else proposed["content"][:40]
            )
            record["interceptions"] = [
                {
                    "step": step,
                    "attempt": 1,
                    "proposed": proposed,
                    "verdict": "invalid",
                    "critique": CRITIQUE,
                    "revised": None,
                }
            ]

    def plant_label(record):
        if record["trajectory_id"] == failed and record["first_critical_error"]:
            record["rationale"]["observed"] += PLANTED_RATIONALE
        if record["trajectory_id"] == FLAGGED:
            record["user_fault"] = True

    _edit_jsonl(RunDir(root).trajectory_file("retail", "test"), plant_trajectory)
    _edit_jsonl(RunDir(root).label_file("retail", "test"), plant_label)
    return root


@pytest.fixture(scope="module")
def page(run, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("page") / "view.html"
    write_view(run, out)
    return out


def embedded_index(html: str) -> dict:
    """The page's index JSON block."""
    block = re.search(r'<script type="application/json" id="castdata-index">(.*?)</script>', html, re.S)
    return json.loads(block.group(1))


def test_the_index_holds_every_episode_with_its_first_error(run, page):
    rows = {row["id"]: row for row in embedded_index(page.read_text())["rows"]}
    assert list(rows) == [t.id for t in read_trajectories(run)]
    failed = rows[CHOSEN["failed"]]
    labels = read_labels(run)[CHOSEN["failed"]]
    first = next(label for label in labels if label.first_critical_error)
    invalid = sum(label.verdict == "invalid" for label in labels)
    assert (failed["outcome"], failed["invalid"], failed["category"]) == ("failure", invalid, first.categories[0])
    assert invalid >= 1 and first.categories[0] == CHOSEN["category"]
    assert rows[FLAGGED]["user_fault"] is True and rows[FLAGGED]["source"] == "imported"
    assert rows[PLANTED_EPISODE]["user_fault"] is False and rows[PLANTED_EPISODE]["source"] == "collected"


def test_planted_markup_never_reaches_the_html_raw(page):
    html = page.read_text()
    assert "<script>window.__planted" not in html and "<img" not in html and "<b " not in html
    assert html.count("<script") == html.count("</script>") == 2 + len(re.findall(r'id="castdata-chunk-\d+"', html))
    assert "noisy\\u003c/script\\u003e\\u003cscript\\u003e" in html


def _failures(run: Path, category: str | None = None) -> list[str]:
    """The failed episodes of the run (with an invalid label of `category`), in file order."""
    labels = read_labels(run)
    return [
        t.id
        for t in read_trajectories(run)
        if t.outcome.reward < 1.0
        and (
            category is None
            or any(category in label.categories for label in labels.get(t.id, []) if label.verdict == "invalid")
        )
    ]


def test_filters_and_one_episode(run, tmp_path):
    out = tmp_path / "failed.html"
    written = write_view(run, out, filters=["outcome=failure", f"category={CHOSEN['category']},policy_violation"])
    expected = [
        i for i in _failures(run) if i in set(_failures(run, CHOSEN["category"]) + _failures(run, "policy_violation"))
    ]
    assert written["episodes"] == len(expected) and CHOSEN["failed"] in expected
    assert [row["id"] for row in embedded_index(out.read_text())["rows"]] == expected
    write_view(run, out, filters=["user_fault=true"])
    faulted = [episode for episode, labels in read_labels(run).items() if any(label.user_fault for label in labels)]
    assert FLAGGED in faulted and [row["id"] for row in embedded_index(out.read_text())["rows"]] == faulted
    write_view(run, out, episode=CHOSEN["failed"])
    index = embedded_index(out.read_text())
    assert index["opened"] == CHOSEN["failed"] and [row["id"] for row in index["rows"]] == [CHOSEN["failed"]]


def test_a_dataset_folder_shows_the_same_episodes(run, page, tmp_path):
    from castdata.builders.dataset import build_dataset
    from castdata.builders.options import BuildOptions

    dataset = build_dataset([run], tmp_path / "dataset", BuildOptions())
    assert dataset["configs"]["trajectories"]
    out = tmp_path / "dataset.html"
    write_view(tmp_path / "dataset", out)
    rows = embedded_index(out.read_text())["rows"]
    from_run = {row["id"]: row for row in embedded_index(page.read_text())["rows"]}
    assert sorted(row["id"] for row in rows) == sorted(from_run)
    assert {row["dataset_split"] for row in rows} == {"test"}
    for row in rows:
        assert {k: v for k, v in row.items() if k not in ("dataset_split", "chunk")} == {
            k: v for k, v in from_run[row["id"]].items() if k not in ("dataset_split", "chunk")
        }


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["view", "{tmp}"], "{tmp}: neither a run directory"),
        (["view", "{run}", "--episode", "retail.test.9.9"], "--episode retail.test.9.9: no such episode in {run}"),
        (["view", "{run}", "--filter", "colour=red"], "--filter 'colour=red': unknown field 'colour'"),
        (["view", "{run}", "--filter", "domain"], "--filter 'domain': expected KEY=VALUE"),
        (["view", "{run}", "--filter", "domain=airline"], "--filter domain=airline: no episode of {run} passes"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(run, tmp_path, args, message):
    where = {"tmp": str(tmp_path), "run": str(run)}
    result = CliRunner().invoke(app, [arg.format(**where) for arg in args] + ["--out", str(tmp_path / "x.html")])
    assert result.exit_code == 2, result.output
    assert result.output.strip().splitlines() == [result.output.strip()]
    assert message.format(**where) in result.output
    assert not (tmp_path / "x.html").exists()


def test_cli_writes_the_page(run, tmp_path):
    result = CliRunner().invoke(app, ["view", str(run), "--out", str(tmp_path / "v.html")])
    assert result.exit_code == 0, result.output
    assert result.output.startswith(f"wrote {tmp_path / 'v.html'}: 8 episodes")


# ---- in a real browser ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def browser():
    if not CHROMIUM.exists():
        pytest.skip(f"no Chromium at {CHROMIUM} (apt-get install -y chromium; .ci/run installs it)")
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is in the dev extra")
    with sync_api.sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), args=BROWSER_ARGS, timeout=60_000)
        yield chromium
        chromium.close()


@pytest.fixture
def tab(browser):
    """A fresh tab that records script and console errors, dialogs and every request it makes."""
    context = browser.new_context(viewport={"width": 1280, "height": 640})
    tab = context.new_page()
    tab.set_default_timeout(15_000)
    tab.errors, tab.requests = [], []
    tab.on("pageerror", lambda error: tab.errors.append(str(error)))
    tab.on("console", lambda message: message.type == "error" and tab.errors.append(message.text))  # CSP refusals too
    tab.on("dialog", lambda dialog: (tab.errors.append(f"dialog: {dialog.message}"), dialog.dismiss()))
    tab.on("request", lambda request: tab.requests.append(request.url))
    yield tab
    context.close()


def test_browser_index_lists_every_episode(run, page, tab):
    tab.goto(page.as_uri())
    ids = tab.locator("table.index tbody td.c-key a").all_inner_texts()
    assert ids == [t.id for t in read_trajectories(run)]
    tab.select_option("select[data-facet=outcome]", "failure")
    assert tab.locator("table.index tbody td.c-key a").all_inner_texts() == _failures(run)
    tab.select_option("select[data-facet=outcome]", "")
    tab.locator("table.index th", has_text="invalid").click()
    tab.locator("table.index th", has_text="invalid").click()  # descending
    most = max(embedded_index(page.read_text())["rows"], key=lambda row: row["invalid"])["invalid"]
    first_shown = tab.locator("table.index tbody td.c-key a").first.inner_text()
    assert next(r for r in embedded_index(page.read_text())["rows"] if r["id"] == first_shown)["invalid"] == most
    assert tab.errors == [] and tab.requests == [page.as_uri()]


def test_browser_episode_shows_its_first_critical_error_and_evidence_scrolls(page, tab):
    failed = CHOSEN["failed"]
    tab.goto(f"{page.as_uri()}#episode={failed}")
    first = tab.locator(".msg.first-error")
    assert first.count() == 1 and first.get_attribute("id") == f"m-{failed}-{CHOSEN['step']}"
    summary = first.locator("details.label > summary")
    assert "invalid · critical" in summary.inner_text() and "first critical error" in summary.inner_text()
    assert PLANTED_RATIONALE in first.locator(".rationale").inner_text()  # rendered as text
    assert "Expected action".upper() in first.locator(".why").inner_text().upper()
    assert "never saw" in tab.locator(".privileged").inner_text()
    assert tab.locator(f"[id='m-{failed}-{CHOSEN['after']}'] .badge").inner_text() == "after first error"
    interception = first.locator(".interception").inner_text()
    assert CRITIQUE in interception and CHOSEN["proposed"] in interception

    link = first.locator("a.evidence-link").first
    cited_step, quote = link.get_attribute("data-step"), link.get_attribute("data-quote")
    cited = tab.locator(f"[id='m-{failed}-{cited_step}']")
    link.evaluate("element => element.scrollIntoView({block: 'start'})")
    assert not _in_viewport(cited)
    link.click()
    tab.wait_for_function(f"location.hash === '#m-{failed}-{cited_step}'")
    assert _in_viewport(cited)
    assert "target" in cited.get_attribute("class")
    assert cited.locator("mark.cited").inner_text() == quote
    ARTIFACTS.mkdir(exist_ok=True)
    tab.screenshot(path=str(ARTIFACTS / "view-episode.png"))
    assert tab.errors == [] and tab.requests == [page.as_uri()]


def test_browser_planted_script_does_not_run(page, tab):
    tab.goto(page.as_uri())
    assert PLANTED_MODEL in tab.locator("table.index tbody").inner_text()
    tab.goto(f"{page.as_uri()}#episode={PLANTED_EPISODE}")
    assert tab.locator(f"[id='m-{PLANTED_EPISODE}-1'] .text").inner_text() == PLANTED
    tab.locator(f"[id='m-{PLANTED_EPISODE}-1'] .text").hover()
    assert tab.evaluate("window.__planted") is None
    assert tab.locator("img").count() == 0
    assert tab.errors == [] and tab.requests == [page.as_uri()]


def _in_viewport(locator) -> bool:
    return locator.evaluate("e => { const r = e.getBoundingClientRect(); return r.bottom > 0 && r.top < innerHeight; }")
