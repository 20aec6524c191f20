"""Documentation that cannot rot: the generated reference pages are fresh, `mkdocs build --strict` passes (every
link and anchor between pages), the README's links resolve, every config snippet validates against the schema,
every documented Snakemake command plans its DAG, the README's findings are the ones a fresh demo run writes, no
hand-written table holds a measured number, and every benchmark page is what its script wrote or its JSON renders to."""

import copy
import importlib.util
import os
import re
import shlex
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

import pytest
import yaml
from conftest import PROJECT_ROOT
from workflow_helpers import SNAKEMAKE

from workflow_scripts.config import reference
from workflow_scripts.core import provenance
from workflow_scripts.core.schema import load_schema, problem_lines
from jsonschema import Draft202012Validator

README = PROJECT_ROOT / "README.md"
PAGES = sorted((PROJECT_ROOT / "docs").glob("*.md"))
DOCUMENTS = [README, *PAGES]
BLOCK = re.compile(r"^```(\w*)\n(.*?)^```", re.MULTILINE | re.DOTALL)


def blocks(language: str) -> list[tuple[str, int, str]]:
    """(file, line, text) of every fenced block of `language` in the README and docs/."""
    found = []
    for path in DOCUMENTS:
        text = path.read_text()
        for match in BLOCK.finditer(text):
            if match.group(1) == language:
                found.append((path.relative_to(PROJECT_ROOT).as_posix(), text[:match.start()].count("\n") + 1,
                              match.group(2)))
    return found


@pytest.mark.parametrize("name", sorted(reference.PAGES))
def test_generated_reference_pages_are_fresh(name):
    page = PROJECT_ROOT / "docs" / name
    assert page.read_text() == reference.PAGES[name]() + "\n", (
        f"docs/{name} is stale: run `.venv/bin/python -m workflow_scripts.config.reference`")


def test_configuration_page_lists_every_key_of_the_schema():
    page = (PROJECT_ROOT / "docs" / "configuration.md").read_text()
    schema = load_schema()
    for key in schema["properties"]:
        assert f"| `{key}` |" in page
    for key in ("routing.pairs.<name>.measure", "models.rerankers.<name>.kind", "budgets.grid"):
        assert f"| `{key}` |" in page
    assert "| `backoff_s` | removed |" in page  # a retired key says what replaces it


def test_docs_build_with_mkdocs_in_strict_mode(tmp_path):
    mkdocs = Path(sys.executable).parent / "mkdocs"
    process = subprocess.run([str(mkdocs), "build", "--strict", "--site-dir", str(tmp_path / "site")],
                             cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=120)
    assert process.returncode == 0, process.stderr[-3000:]
    assert (tmp_path / "site" / "configuration" / "index.html").is_file()


def anchors(path: Path) -> set[str]:
    """The heading anchors of a Markdown page, as mkdocs and GitHub write them (lower case, punctuation dropped,
    spaces to hyphens)."""
    slugs = set()
    for line in path.read_text().splitlines():
        if line.startswith("#"):
            title = line.lstrip("#").strip().lower()
            slugs.add(re.sub(r"\s+", "-", re.sub(r"[^\w\s-]", "", title)))
    return slugs


def test_readme_is_short_and_its_links_resolve():
    text = README.read_text()
    assert len(text.splitlines()) <= 200
    first = BLOCK.search(text)
    assert first and first.group(1) == "bash" and text[:first.start()].count("\n") == 2, "README opens with the commands"
    commands = [line for line in first.group(2).splitlines() if line.strip()]
    assert len(commands) == 2 and commands[0].startswith("./setup.sh &&") and "pytest" in commands[1]
    for label, target in re.findall(r"\[([^\]]+)\]\(([^)]+)\)", text):
        if target.startswith("http"):
            continue
        file, _, anchor = target.partition("#")
        path = PROJECT_ROOT / file
        assert path.exists(), f"README.md: link [{label}]({target}) points at nothing"
        if anchor:
            assert anchor in anchors(path), f"README.md: link [{label}]({target}): no heading '{anchor}' in {file}"


# No measured number in a hand-written table (#42): tables of measurements are generated (docs/measured/** from a run
# or a committed benchmark JSON, configuration.md and outputs.md from the schema and contracts); a prose page links
# them and quotes a number or two in a sentence. A table cell "looks like a measurement" when it holds a standalone
# number (not part of a name: SmolLM2-135M, nDCG@10, 10k, Qwen2.5, a version such as 0.2.8) with a decimal part, a
# thousands separator or an exponent, or followed by a unit of time, memory or share (9.2 min, 62s, 4 GiB, 95%, 3×).
# Integers alone (counts of inputs such as "65 questions", scales such as "0–2") are facts of the config, not
# measurements. Code spans are not prose (config keys and values, file names). A number that is the text of a link to
# a record under measured/ is allowed when that record holds it: the record is the source and this test checks the
# copy (the README's runtimes).
PROSE_PAGES = [README, *(path for path in PAGES if path.name not in reference.PAGES)]
UNIT = r"(?:\s?(?:ms|s|min|minutes|h|hours|KiB|MiB|GiB|KB|MB|GB|%)|×)(?!\w)"
MEASUREMENT = re.compile(rf"(?<![\w@.\-/])(\d+(?:,\d{{3}})*(?:\.\d+)?(?:e[-+]?\d+)?)({UNIT}|(?![\w.]))")
RECORD_LINK = re.compile(r"\[([^\]]*)\]\(((?:docs/)?measured/[^)#\s]+)[^)]*\)")
# (page, the number as written): why it is not a measurement. Keep it short; prefer fixing the page.
NOT_MEASURED = {
    ("docs/judging.md", "0.32"): "vLLM 0.32, the version whose grammar bitmask the row describes (a version pin)",
    ("docs/getting-started.md", "95%"): "the 95% level of the review sheet's CIs (a setting)",
}


def measurements(text: str) -> list[str]:
    """The numbers in `text` that look like measurements (see above)."""
    return [match.group(0) for match in MEASUREMENT.finditer(text) if re.search(r"[.,e]", match.group(1)) or match.group(2)]


def table_rows(path: Path) -> list[tuple[int, str]]:
    """(line number, text) of every Markdown table row of a page outside fenced blocks, separators left out."""
    rows, fenced = [], False
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif not fenced and line.startswith("|") and not re.fullmatch(r"\|[\s:|-]+", line):
            rows.append((number, line))
    return rows


def test_measurements_are_told_from_names_counts_and_settings():
    assert measurements("| one per job | 1,560.6 s | 110 | 8 | 8 | 1,440.7 |") == ["1,560.6 s", "1,440.7"]
    assert measurements("| ingest | 0.37 | 2.36 | 13.8 | 0.78 | 234 MiB |") == ["0.37", "2.36", "13.8", "0.78", "234 MiB"]
    assert measurements("| CACM | BM25 (k1 0.9, b 0.4) | MAP 0.3123, P@30 0.1942 |") == ["0.9", "0.4", "0.3123", "0.1942"]
    assert measurements("took 62s, 3× faster, 4GiB, 96.0% and 1.4e-7") == ["62s", "3×", "4GiB", "96.0%", "1.4e-7"]
    assert measurements("| 12 demo papers, 65 questions | SmolLM2-135M | 1.5B–8B, Qwen2.5, ColBERTv2 | nDCG@10, "
                        "R@100 | 10k / 1M units | 2 threads, 0–2, 3 × 5 | xgrammar 0.2.8 |") == []


@pytest.mark.parametrize("page", [path.relative_to(PROJECT_ROOT).as_posix() for path in PROSE_PAGES])
def test_no_hand_written_table_holds_a_measured_number(page):
    path = PROJECT_ROOT / page
    problems = []
    for number, row in table_rows(path):
        for match in RECORD_LINK.finditer(row):
            record = (path.parent / match.group(2)).resolve()
            assert record.is_file(), f"{page}:{number}: links {match.group(2)}, which does not exist"
            for quoted in measurements(match.group(1)):
                assert quoted in record.read_text(), (
                    f"{page}:{number}: [{match.group(1)}]({match.group(2)}) quotes {quoted}, which its record does not hold")
        prose = re.sub(r"\]\([^)]*\)", "]", re.sub(r"`[^`]*`", "", RECORD_LINK.sub("", row)))
        problems += [f"{page}:{number}: {quoted}" for quoted in measurements(prose) if (page, quoted) not in NOT_MEASURED]
    assert not problems, ("a hand-written table holds measured numbers: link the record (docs/measured/) or render the "
                          "benchmark JSON (benchmarks/render_bench_json.py) instead:\n" + "\n".join(problems))


def test_each_exemption_from_the_table_rule_is_still_needed():
    for (page, quoted), reason in NOT_MEASURED.items():
        rows = [row for _, row in table_rows(PROJECT_ROOT / page)]
        assert any(quoted in measurements(re.sub(r"`[^`]*`", "", row)) for row in rows), (
            f"{page}: no table cell holds {quoted} any more ({reason}); drop its entry from NOT_MEASURED")


def merged(base: dict, layer: dict) -> dict:
    """`layer` on top of `base`, dictionaries merged key by key (as Snakemake layers --configfile)."""
    result = copy.deepcopy(base)
    for key, value in layer.items():
        result[key] = merged(result[key], value) if isinstance(value, dict) and isinstance(result.get(key), dict) else value
    return result


CONFIG_SNIPPETS = blocks("yaml")


def test_the_docs_hold_config_snippets():
    assert len(CONFIG_SNIPPETS) >= 5


@pytest.mark.parametrize("where", [f"{file}:{line}" for file, line, _ in CONFIG_SNIPPETS])
def test_every_config_snippet_validates_against_the_schema(where):
    """Each YAML block, layered on config.yaml as `--configfile` would, is a valid config (schema only: the files
    a snippet names may live elsewhere)."""
    text = next(body for file, line, body in CONFIG_SNIPPETS if f"{file}:{line}" == where)
    snippet = yaml.safe_load(text)
    assert isinstance(snippet, dict), f"{where}: not a config mapping"
    config = merged(yaml.safe_load((PROJECT_ROOT / "config.yaml").read_text()), snippet)
    problems = problem_lines(Draft202012Validator(load_schema()), config)
    assert problems == [], f"{where}: " + "; ".join(problems)


def documented_commands() -> list[tuple[str, list[str]]]:
    """Every `snakemake` command of a bash block (the README's and the docs'), as arguments after `snakemake`."""
    commands = []
    for file, line, body in blocks("bash"):
        for offset, text in enumerate(body.splitlines()):
            command = text.split("#", 1)[0].split("&&")[-1].strip()
            if command.startswith(".venv/bin/snakemake"):
                commands.append((f"{file}:{line + 1 + offset}", shlex.split(command)[1:]))
    return commands


COMMANDS = documented_commands()
# What a dry run cannot show: a report needs a finished run, and the SLURM profile submits to a cluster.
NOT_PLANNED = ("--report", "profiles/slurm")


def test_the_docs_hold_snakemake_commands():
    assert len(COMMANDS) >= 4


@pytest.mark.slow
@pytest.mark.integration
@pytest.mark.needs_data
@pytest.mark.parametrize("where", sorted({where for where, _ in COMMANDS}))
def test_every_documented_command_plans_its_dag(where):
    arguments = dict(COMMANDS)[where]
    if any(flag in arguments for flag in NOT_PLANNED):
        pytest.skip(f"{where}: {' '.join(arguments)} needs a finished run or a cluster")
    process = subprocess.run([*SNAKEMAKE, *arguments, "--dry-run", "--nolock"], cwd=PROJECT_ROOT, capture_output=True,
                             text=True, timeout=600)
    assert process.returncode == 0, f"{where}: snakemake {' '.join(arguments)} --dry-run failed:\n{process.stdout[-3000:]}{process.stderr[-3000:]}"


FINDINGS_BLOCK = re.compile(r"<!-- findings: demo \(generated; tests/test_docs.py\) -->\n(.*?)<!-- /findings -->", re.DOTALL)


@pytest.mark.slow
@pytest.mark.integration
def test_readme_quotes_the_findings_a_fresh_demo_run_writes(demo_run):
    """The README's demo findings are the summary's own landing findings, every line, word for word (refresh the
    block from results/summary_demo.md when a change moves them)."""
    quoted = FINDINGS_BLOCK.search(README.read_text()).group(1).splitlines()
    summary = (demo_run / "results" / "summary_demo.md").read_text()
    findings = summary[summary.index("## Findings"):summary.index("\n## demo")].splitlines()
    expected = [line for line in findings if line.startswith("- ")]
    assert quoted == expected, "README.md's findings block differs from results/summary_demo.md: copy the lines over"


def record_run_module():
    spec = importlib.util.spec_from_file_location("record_run", PROJECT_ROOT / "benchmarks" / "record_run.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


RECORDS = sorted((PROJECT_ROOT / "docs" / "measured").glob("*.md"))


@pytest.mark.parametrize("page", [path.name for path in RECORDS])
def test_each_measured_record_names_a_commit_of_this_repository_and_a_config_that_exists(page):
    """docs/measured/*.md are written by benchmarks/record_run.py from a run, never edited: each says which commit
    and config produced it, and sits in the mkdocs nav."""
    text = (PROJECT_ROOT / "docs" / "measured" / page).read_text()
    assert record_run_module().HEADER in text, f"docs/measured/{page}: not written by benchmarks/record_run.py"
    config, commit = re.search(r"^`([^`]+\.yaml)` \(sha256 `\w+`\) at commit `(\w+)`", text, re.MULTILINE).groups()
    assert (PROJECT_ROOT / config).is_file(), f"docs/measured/{page}: its config {config} no longer exists"
    known = subprocess.run(["git", "cat-file", "-e", f"{commit}^{{commit}}"], cwd=PROJECT_ROOT, capture_output=True)
    assert known.returncode == 0, f"docs/measured/{page}: commit {commit} is not in this repository's history"
    assert f"measured/{page}" in (PROJECT_ROOT / "mkdocs.yml").read_text(), f"docs/measured/{page}: not in mkdocs.yml's nav"
    size = float(re.search(r"`results/summary_\w+\.md` \(([\d.]+) KB\)", text).group(1))
    assert size <= 40, f"docs/measured/{page}: the run's landing summary is {size} KB, over the 40 KB a reader can take"
    span = re.search(r"jobs, ([\d.]+ min) from the first job's start", text).group(1)
    assert f"[{span}](docs/measured/{page})" in README.read_text(), (
        f"README.md: the study configs table should give {page}'s runtime as [{span}](docs/measured/{page})")


def test_record_run_turns_a_finished_run_into_a_page(tmp_path):
    module = record_run_module()
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]
    (tmp_path / "experiments").mkdir()
    (tmp_path / "experiments" / "toy.yaml").write_text("name: toy\n")
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    subprocess.run([*git, "add", "."], cwd=tmp_path, check=True)
    subprocess.run([*git, "commit", "-qm", "toy"], cwd=tmp_path, check=True)
    results = tmp_path / "results"
    with pytest.raises(SystemExit, match="summary_toy.md does not exist"):
        module.record("toy", results)
    (results / "benchmarks" / "rule").mkdir(parents=True)
    (results / "summary_toy.md").write_text(
        "# ragfrontier results: toy\n\n## Findings\n\n- Pair `p`: rescues 2.\n\n## ds\n\n"
        "Every table in full: [summary_toy/ds.md](summary_toy/ds.md).\n")
    with pytest.raises(SystemExit, match="no Snakemake benchmark file"):
        module.record("toy", results)
    for name, seconds, end in (("a", 60.0, 1_000_000_060), ("b", 30.0, 1_000_000_300)):
        path = results / "benchmarks" / "rule" / f"{name}.tsv"
        path.write_text(f"s\th:m:s\n{seconds}\t0:00:00\n")
        os.utime(path, (end, end))
    page = module.record("toy", results)
    assert "`experiments/toy.yaml` (sha256 `" in page and "2 jobs, 5.0 min from the first job's start" in page
    assert "1.5 min of job time summed" in page and "with uncommitted changes" not in page
    assert "results/summary_toy.md` (0.1 KB)" in page
    assert "### Findings" in page and "- Pair `p`: rescues 2." in page
    assert "`results/summary_toy/ds.md`" in page and "](summary_toy" not in page
    (tmp_path / "experiments" / "toy.yaml").write_text("name: toy  # edited after the run\n")
    assert "with uncommitted changes (experiments/toy.yaml)" in module.record("toy", results)
    first = subprocess.run(["git", "rev-parse", "HEAD"], cwd=tmp_path, capture_output=True, text=True).stdout
    assert f"at commit `{first[:10]}`, finished" in module.record("toy", results, commit=first.strip())


def test_record_run_takes_the_commit_from_the_runs_provenance(tmp_path):
    """The Snakefile writes results/logs/runs/<started>.json per invocation (core/provenance.py): the record names
    the commit the run used, not HEAD, and stops on a run that mixed commits or read another version of the config."""
    module = record_run_module()
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]
    config = tmp_path / "experiments" / "toy.yaml"
    config.parent.mkdir()
    config.write_text("name: toy\n")
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    subprocess.run([*git, "add", "."], cwd=tmp_path, check=True)
    subprocess.run([*git, "commit", "-qm", "toy"], cwd=tmp_path, check=True)
    ran = subprocess.run(["git", "rev-parse", "HEAD"], cwd=tmp_path, capture_output=True, text=True).stdout.strip()
    (tmp_path / "later.txt").write_text("a later commit\n")
    subprocess.run([*git, "add", "."], cwd=tmp_path, check=True)
    subprocess.run([*git, "commit", "-qm", "later"], cwd=tmp_path, check=True)
    results = tmp_path / "results"
    (results / "benchmarks" / "rule").mkdir(parents=True)
    (results / "benchmarks" / "rule" / "a.tsv").write_text("s\th:m:s\n60.0\t0:00:00\n")
    (results / "summary_toy.md").write_text("# ragfrontier results: toy\n\n## Findings\n\n- none\n")
    run = provenance.run_record(tmp_path, {"name": "toy"}, [str(config)], 1, datetime.now(timezone.utc), "9")
    provenance.write_run_record(run | {"commit": ran}, results / "logs" / "runs")
    assert f"at commit `{ran[:10]}`, finished" in module.record("toy", results)
    resumed = {"count": 3, "files": ["rules/a.smk", "Snakefile"]}  # a second invocation, 3 files changed, 2 listed
    provenance.write_run_record(run | {"commit": ran, "uncommitted": resumed}, results / "logs" / "runs")
    assert (f"at commit `{ran[:10]}` with uncommitted changes (Snakefile, rules/a.smk, more), finished"
            in module.record("toy", results))
    config.write_text("name: toy  # edited after the run\n")
    with pytest.raises(SystemExit, match="read another version of toy.yaml"):
        module.record("toy", results)
    config.write_text("name: toy\n")
    provenance.write_run_record(run, results / "logs" / "runs")  # resumed on the later commit
    with pytest.raises(SystemExit, match="used commits .* name the one to record with --commit"):
        module.record("toy", results)
    assert f"at commit `{ran[:10]}`, finished" in module.record("toy", results, commit=ran)


def record_bench_module():
    spec = importlib.util.spec_from_file_location("record_bench", PROJECT_ROOT / "benchmarks" / "record_bench.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def render_bench_json_module():
    spec = importlib.util.spec_from_file_location("render_bench_json", PROJECT_ROOT / "benchmarks" / "render_bench_json.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


RENDERED = sorted(render_bench_json_module().PAGES)  # pages rendered from a committed benchmark JSON
BENCH_RECORDS = sorted(path for path in (PROJECT_ROOT / "docs" / "measured" / "bench").glob("*.md")
                       if path.stem not in RENDERED)


@pytest.mark.parametrize("name", RENDERED)
def test_each_page_rendered_from_a_benchmark_json_is_what_the_committed_json_renders_to(name):
    """docs/measured/bench/<name>.md is benchmarks/render_bench_json.py's rendering of benchmarks/<name>.json, never
    edited: a JSON committed without re-rendering (or an edited page) fails here. Each sits in the nav and the
    Benchmarks page links it."""
    page = PROJECT_ROOT / "docs" / "measured" / "bench" / f"{name}.md"
    assert page.is_file() and page.read_text() == render_bench_json_module().render(name), (
        f"docs/measured/bench/{name}.md is stale: run `.venv/bin/python benchmarks/render_bench_json.py`")
    assert f"measured/bench/{name}.md" in (PROJECT_ROOT / "mkdocs.yml").read_text(), (
        f"docs/measured/bench/{name}.md: not in mkdocs.yml's nav")
    assert f"(measured/bench/{name}.md)" in (PROJECT_ROOT / "docs" / "benchmarks.md").read_text(), (
        f"docs/benchmarks.md: its Benchmarks list should link measured/bench/{name}.md")


def test_every_benchmark_page_is_written_by_a_script():
    for path in (PROJECT_ROOT / "docs" / "measured" / "bench").glob("*.md"):
        header = render_bench_json_module().HEADER if path.stem in RENDERED else record_bench_module().HEADER
        assert header in path.read_text(), f"docs/measured/bench/{path.name}: written by neither script"


@pytest.mark.parametrize("page", [path.name for path in BENCH_RECORDS])
def test_each_benchmark_record_names_a_commit_of_this_repository_and_a_script_that_exists(page):
    """docs/measured/bench/*.md are written by benchmarks/record_bench.py from a benchmark run, never edited: each
    names the command and commit that produced it, and sits in the mkdocs nav."""
    text = (PROJECT_ROOT / "docs" / "measured" / "bench" / page).read_text()
    assert record_bench_module().HEADER in text, f"docs/measured/bench/{page}: not written by benchmarks/record_bench.py"
    script, commit = re.search(r"^`\.venv/bin/python (benchmarks/\w+\.py)[^`]*` at commit `(\w+)`", text,
                               re.MULTILINE).groups()
    assert Path(script).stem == Path(page).stem, f"docs/measured/bench/{page}: records {script}, not {page}'s script"
    assert (PROJECT_ROOT / script).is_file(), f"docs/measured/bench/{page}: its script {script} no longer exists"
    known = subprocess.run(["git", "cat-file", "-e", f"{commit}^{{commit}}"], cwd=PROJECT_ROOT, capture_output=True)
    assert known.returncode == 0, f"docs/measured/bench/{page}: commit {commit} is not in this repository's history"
    assert f"measured/bench/{page}" in (PROJECT_ROOT / "mkdocs.yml").read_text(), (
        f"docs/measured/bench/{page}: not in mkdocs.yml's nav")
    assert f"(measured/bench/{page})" in (PROJECT_ROOT / "docs" / "benchmarks.md").read_text(), (
        f"docs/benchmarks.md: its Benchmarks list should link the record measured/bench/{page}")


def test_every_benchmark_script_the_docs_name_exists():
    """A renamed or removed script of benchmarks/ leaves no page telling a reader to run it."""
    for path in [*DOCUMENTS, PROJECT_ROOT / "benchmarks" / "README.md"]:
        for number, line in enumerate(path.read_text().splitlines(), 1):
            for script in re.findall(r"benchmarks/(\w+\.py)", line):
                assert (PROJECT_ROOT / "benchmarks" / script).is_file(), (
                    f"{path.relative_to(PROJECT_ROOT)}:{number}: names benchmarks/{script}, which does not exist")


def test_record_bench_records_a_scripts_report_and_nothing_when_it_fails(tmp_path, monkeypatch, capsys):
    module = record_bench_module()
    script = tmp_path / "bench_toy.py"
    script.write_text(f"import sys\nprint('ratio 1.02, config {PROJECT_ROOT}/config.yaml')\n"
                      "print('progress', file=sys.stderr)\nsys.exit(int(sys.argv[1]))\n")
    output, seconds, before = module.run(script, ["0"])
    assert output == f"ratio 1.02, config {PROJECT_ROOT}/config.yaml\n" and seconds > 0 and before.count(",") == 2
    page = module.record(script, ["0"], output, seconds, before)
    assert module.HEADER in page and "`.venv/bin/python benchmarks/bench_toy.py 0` at commit `" in page
    assert "```text\nratio 1.02, config config.yaml\n```" in page and "progress" not in page
    with pytest.raises(SystemExit, match="bench_toy.py 3 exited with status 3; no record written"):
        module.run(script, ["3"])
    monkeypatch.setattr(sys, "argv", ["record_bench.py", "bench_nothing.py"])
    with pytest.raises(SystemExit, match="is not a script of benchmarks/"):
        module.main()
