"""No stale companion: the texts beside the committed results say what their folders' tables say.

A results README, the campaigns index (docs/campaigns/index.md), a folder's trust table and the README's split
paragraph are companions of the tables: each test here fails when one contradicts them (a folder listed that
does not exist, a committed folder not listed, a mode trusted "ok" that its flags mark, a claim of agreement
the figures do not hold, a cause the split tables do not identify, a number a README quotes that its table no
longer has). The committed split tables say only what the data identify, and new folders record the machine
state that can move a loss.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from sharebench.analysis.flags import trust_flags
from sharebench.analysis.spread import document_work, run_sources
from sharebench.analysis.timeslice_split import doc_rows
from sharebench.telemetry.provenance import MACHINE_STATE_FIELDS
from support.paths import ROOT
from tools import split_tables
from tools.headline_spread import report as spread_report

INDEX = ROOT / "docs" / "campaigns" / "index.md"
LINK = re.compile(r"\]\(([^)\s]+)\)")
SPLIT_TABLE = Path("tables") / "timeslice_split.csv"
MACHINE_STATE_SINCE = "2026-12-04T22:00:00+00:00"  # provenance written after issue 45 carries machine_state


def tracked(pattern: str) -> list[Path]:
    out = subprocess.run(["git", "-C", str(ROOT), "ls-files", "--", pattern], capture_output=True, text=True)
    if out.returncode != 0:
        pytest.skip("not a git checkout: the committed files are not known")
    return [ROOT / f for f in out.stdout.split()]


def readmes() -> list[Path]:
    return tracked("results/*README.md")


def split_folders() -> list[Path]:
    return sorted({p.parent.parent for p in tracked("results/*tables/timeslice_split.csv")})


def split_tables_committed() -> list[tuple[Path, pd.DataFrame]]:
    return [(f, pd.read_csv(f / SPLIT_TABLE)) for f in split_folders() if len(pd.read_csv(f / SPLIT_TABLE))]


# ------------------------------------------------------------------ folders listed


def test_every_folder_of_the_campaigns_index_exists_and_every_committed_folder_is_listed():
    listed = {(INDEX.parent / t.split("#")[0]).resolve() for t in LINK.findall(INDEX.read_text())}
    listed_dirs = {p.parent if p.suffix == ".md" else p for p in listed if "results" in p.parts}
    missing = sorted(str(p) for p in listed if "results" in p.parts and not p.exists())
    assert not missing, f"docs/campaigns/index.md links folders that do not exist: {missing}"
    campaigns = {r.parent.resolve() for r in readmes()}
    unlisted = sorted(str(c.relative_to(ROOT)) for c in campaigns - listed_dirs)
    assert not unlisted, f"committed campaign folders (a README.md) that docs/campaigns/index.md does not list: {unlisted}"
    folders = {p.parent.resolve() for p in tracked("results/*results.csv")}
    loose = sorted(str(f.relative_to(ROOT)) for f in folders if not any(c == f or c in f.parents for c in listed_dirs))
    assert not loose, f"results folders under no listed campaign: {loose}"


def named(folder: Path, readme: Path) -> bool:
    """Whether ``readme`` names ``folder``: its path from the README's folder, or each part of it as a word."""
    text = readme.read_text()
    rel = folder.relative_to(readme.parent).as_posix()
    return rel == "." or rel in text or all(re.search(rf"(?<![\w-]){re.escape(p)}(?![\w-])", text) for p in rel.split("/"))


def test_every_results_folder_is_named_by_its_campaign_readme_and_its_links_resolve():
    docs = readmes()
    for folder in sorted({p.parent for p in tracked("results/*results.csv")}):
        readme = next((d for d in sorted(docs, key=lambda d: -len(d.parts)) if d.parent in (folder, *folder.parents)), None)
        assert readme is not None and named(folder, readme), f"{folder.relative_to(ROOT)} is not named by {readme}"
    for readme in docs:
        targets = [t for t in LINK.findall(readme.read_text()) if not re.match(r"^(?:[a-z]+:|#)", t)]
        gone = [t for t in targets if not (readme.parent / t.split("#")[0]).exists()]
        assert not gone, f"{readme.relative_to(ROOT)} links what does not exist: {gone}"


# ------------------------------------------------------------------ flags against trust


def judged_particles(cells: pd.DataFrame, mode: str) -> object:
    """The work a mode's trust is judged at: the largest particle count of its measured, kept cells."""
    mine = cells[(cells["mode"] == mode) & ~cells["warmup"].astype(bool)]
    good = mine[~mine["excluded"].astype(bool)]
    return (good if len(good) else mine)["particles"].max()


def test_no_trust_table_says_ok_for_a_mode_its_flags_mark():
    checked = 0
    for trust_csv in tracked("results/*tables/trust.csv"):
        tables = trust_csv.parent
        trust, flags = pd.read_csv(trust_csv), pd.read_csv(tables / "flags.csv")
        cells = pd.read_csv(tables / "cells.csv")
        for _, row in trust[trust["trust"] == "ok"].iterrows():
            marks = trust_flags(flags, row["mode"], judged_particles(cells, row["mode"]))
            assert marks.empty, (
                f"{tables.parent.relative_to(ROOT)}: trust says ok for {row['mode']}, its flags say "
                f"{sorted(set(marks['kind']))}: rebuild the report (python -m tools.rebuild_reports --write)"
            )
            checked += 1
    assert checked > 20


# ------------------------------------------------------------------ claims against the figures


def paragraphs(path: Path) -> list[str]:
    return [p for p in re.split(r"\n\s*\n", path.read_text()) if p.strip()]


def split_rows_of(paragraph: str, base: Path) -> pd.DataFrame:
    """The split rows a paragraph is about: those of the folders it links, else of its own folder; from their
    split tables and from the ``probe split`` documents they hold (a folder without a table: results/timeslice)."""
    linked = [(base / t.split("#")[0]).resolve() for t in LINK.findall(paragraph)]
    folders = [p.parent if p.suffix == ".md" else p for p in linked] or [base.resolve()]
    frames = [t for f, t in split_tables_committed() if any(f == d or d in f.parents for d in folders)]
    docs = [s for d in folders if d.is_dir() for s in run_sources([d]) if s.suffix == ".json"]
    for d in docs:
        doc = json.loads(d.read_text())
        work = document_work(doc, d) or {"engine": str(doc.get("workload") or "")}
        frames.append(pd.DataFrame([{**work, **r} for r in doc_rows(doc)]))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def prose() -> list[Path]:
    return [*readmes(), ROOT / "docs" / "readme" / "_front.md", ROOT / "docs" / "readme" / "_results.md"]


WORKLOADS = {"resnet": "resnet", "simpletrack": "simpletrack"}  # a word of a sentence -> rows whose engine has it


def overclaimed(text: str, base: Path) -> list[str]:
    """The sentences of ``text`` that say a prediction lands "within X points" of the measured loss (or
    agrees within them) while a split row they are about misses by more: the rows of the folders their
    paragraph links (else of ``base``), of the workloads the sentence names (all when it names none)."""
    out = []
    for para in (p for p in re.split(r"\n\s*\n", text) if p.strip()):
        for sentence in re.split(r"(?<=[.;:])\s+(?=[A-Z])", para.replace("\n", " ")):
            claims = re.findall(r"within (\d+(?:\.\d+)?) points?", sentence)
            if not claims or not re.search(r"predict|agree", sentence):
                continue
            rows = split_rows_of(para, base)
            names = [v for k, v in WORKLOADS.items() if k in sentence.lower()]
            if len(rows) and names:
                rows = rows[rows["engine"].astype(str).str.lower().str.contains("|".join(names))]
            worst = float(rows["error_pts"].abs().max()) if len(rows) else 0.0
            if any(worst > float(x) for x in claims):
                out.append(f"'within {', '.join(claims)} points' but |error| {worst:.2f}")
    return out


def test_no_claim_of_agreement_within_n_points_exceeds_the_split_figures():
    """A paragraph that says a prediction lands "within X points" of the measured loss must hold for every split
    row of the folders it is about: results/timeslice said "agrees within 0.3 points" of an error of +0.32."""
    for path in prose():
        assert not overclaimed(path.read_text(), path.parent), f"{path.relative_to(ROOT)}: {overclaimed(path.read_text(), path.parent)}"
    stale = "ResNet-18's loss is switch idle plus a small refill\nand the prediction agrees within 0.3 points."
    assert overclaimed(stale, ROOT / "results" / "timeslice") == ["'within 0.3 points' but |error| 0.32"]


def test_no_readme_blames_a_term_the_split_tables_do_not_identify():
    """Once a committed split table finds the evicted term not identified, no companion names cache or TLB
    eviction as a cause without saying it was rejected."""
    rejected = any("evict (" in str(x) for _, t in split_tables_committed() for x in t["not_identified"].fillna(""))
    assert rejected  # the 2026-12-04 folder: heavy refill below the light one
    for path in prose():
        for para in paragraphs(path):
            blames = re.search(r"evict\w*[^.]{0,80}(cache|TLB)|(cache|TLB)[^.]{0,80}evict", para)
            said = re.search(r"not identified|rejects?|[Ss]uperseded", para)
            assert not blames or said, f"{path.relative_to(ROOT)} blames eviction: {para[:160]}"


def numbers(text: str) -> set[str]:
    return {n.replace("−", "-").lstrip("+-") for n in re.findall(r"[−+-]?\d+\.\d\d(?!\d)", text)}


def test_every_figure_a_split_readme_tables_is_in_its_split_table():
    """The numbers of a split folder's README table (losses, transfers, the probe pair, what is unexplained and
    their intervals) are those of its derived table, to two decimals: a README cannot keep yesterday's table."""
    checked = 0
    for folder, t in split_tables_committed():
        readme = folder.parent / "README.md"
        if not readme.is_file():
            continue
        have = {f"{abs(float(v)):.2f}" for c in t.columns for v in pd.to_numeric(t[c], errors="coerce").dropna()}
        for line in (x for x in readme.read_text().splitlines() if x.startswith("| ") and "%" in x):
            stale = numbers(line.split("|", 2)[2]) - have  # the first cell names the workload
            assert not stale, f"{readme.relative_to(ROOT)}: {sorted(stale)} are not in {folder.name}/{SPLIT_TABLE}"
            checked += 1
    assert checked >= 3


# ------------------------------------------------------------------ the split tables and the spread


TIME_COLUMNS_SIGNED = {"missing_ms"}  # a difference (implied less fitted refill), not a duration


def test_the_committed_split_tables_say_only_what_the_data_identify():
    """No negative time, no interval of zero width, no rate above 1 reported as a refill."""
    tables = split_tables_committed()
    assert tables
    for folder, t in tables:
        where = folder.relative_to(ROOT)
        for c in [c for c in t.columns if "_ms" in c and c.split("_ci_")[0] not in TIME_COLUMNS_SIGNED]:
            v = pd.to_numeric(t[c], errors="coerce")
            assert not (v < 0).any(), f"{where}: {c} holds a negative time"
        for low in [c for c in t.columns if c.endswith("_ci_low")]:
            lo, hi = (pd.to_numeric(t[x], errors="coerce").to_numpy() for x in (low, low.replace("_low", "_high")))
            both = np.isfinite(lo) & np.isfinite(hi)
            assert (hi[both] > lo[both]).all(), f"{where}: {low} has an interval of zero width"
        for rate, refill in (("in_slice_rate", "refill_ms"), ("in_slice_rate_light", "refill_light_ms")):
            faster = pd.to_numeric(t[rate], errors="coerce") > 1
            assert t.loc[faster, refill].isna().all(), f"{where}: a rate above 1 reported as a {refill}"
        assert t["independent_pct"].notna().all() and t["switch_ms_ci_low"].notna().all()


def probe_split_folders() -> list[Path]:
    """The folders whose split table comes from ``probe split`` documents (a sweep's is rebuilt with its report)."""
    folders = sorted({p.parent for p in ROOT.glob("results/**/commands.txt")})
    return [f for f in folders if (f / SPLIT_TABLE).is_file() and split_tables.split_commands(f)]


@pytest.mark.parametrize("folder", probe_split_folders(), ids=lambda f: f.name)
def test_a_split_table_is_what_its_documents_give(folder):
    assert split_tables.stale(folder) == ""


def test_the_headline_spread_is_generated_from_every_committed_run():
    """results/h200/headline_spread.md is what tools.headline_spread makes of every committed run under the
    paths its first line names, and those include the split, time-to-answer and results/timeslice runs."""
    path = ROOT / "results" / "h200" / "headline_spread.md"
    first, *lines = path.read_text().splitlines()
    command = re.search(r"`python -m tools.headline_spread (.+) --out ", first)
    assert command, "the first line names the command that made the file"
    paths = [str(ROOT / p) for p in command.group(1).split()]
    sources = {str(s.relative_to(ROOT)) for s in run_sources(paths)}
    for part in ("timeslice-split-2026-12-04", "time-to-answer-2026-12-04", "results/timeslice/", "GPU-4df603ce/split"):
        assert any(part in s for s in sources), part
    made = [x.replace(str(ROOT) + "/", "") for x in spread_report(paths) or []]
    assert lines == made, "python -m tools.headline_spread ... --out results/h200/headline_spread.md"


# ------------------------------------------------------------------ the machine state of new folders


def provenances() -> list[tuple[Path, dict]]:
    out = [(p, json.loads(p.read_text())) for p in tracked("results/*provenance*.json")]
    for doc in tracked("results/*.json"):
        if "provenance" not in doc.name and doc.parent.name != "tables":
            try:
                d = json.loads(doc.read_text())
            except ValueError:
                continue
            if isinstance(d, dict) and isinstance(d.get("provenance"), dict):
                out.append((doc, d["provenance"]))
    return out


def test_new_folders_record_the_machine_state_that_can_move_a_loss():
    """A provenance written since issue 45 has every field of the machine's state, a value or the reason it is
    missing; older ones are the headline's 'not recorded' (its machine-state section counts them)."""
    for path, prov in provenances():
        state = prov.get("machine_state")
        if str(prov.get("created_utc") or "") < MACHINE_STATE_SINCE and state is None:
            continue
        assert isinstance(state, dict), f"{path.relative_to(ROOT)} lacks machine_state"
        why = state.get("unavailable") or {}
        missing = [f for f in MACHINE_STATE_FIELDS if f not in state or (state[f] is None and not why.get(f))]
        assert not missing, f"{path.relative_to(ROOT)}: {missing} neither recorded nor explained"
        assert (prov.get("sharebench") or {}).get("source_sha256"), f"{path.relative_to(ROOT)}: no source hash"
