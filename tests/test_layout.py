"""The package's shape: one subpackage per stage (and `config`, which validates them all), no import cycle, `core`
below every stage, an In/Out docstring on every module, every rule's script inside the package, and no production
function that only tests call."""

import ast
import io
import re
import tokenize
from collections import Counter
from pathlib import Path

from conftest import PROJECT_ROOT

PACKAGE = PROJECT_ROOT / "workflow_scripts"
STAGES = {"config", "core", "stats", "ingest", "retrieval", "llm", "judging", "answers", "routing", "cost", "report",
          "study_c", "multistep", "jobs"}  # `jobs`: the job layer's runtime and generic gather, above every library package


def module_name(path: Path) -> str:
    parts = path.relative_to(PROJECT_ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def imports(path: Path) -> set[str]:
    """workflow_scripts modules `path` imports (at any depth, lazily or not), resolved to module names."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("workflow_scripts"):
            for alias in node.names:
                candidate = f"{node.module}.{alias.name}"
                found.add(candidate if candidate in MODULES else node.module)
        elif isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names if alias.name.startswith("workflow_scripts")}
    return {name for name in found if name in MODULES}


GRAPH = {name: imports(path) - {name} for name, path in MODULES.items()}


def test_the_package_is_one_subpackage_per_stage():
    top = {path.name for path in PACKAGE.iterdir() if path.is_dir() and not path.name.startswith("__")}
    assert top == STAGES
    assert [path.name for path in PACKAGE.glob("*.py")] == ["__init__.py"]


def assert_acyclic(graph: dict[str, set[str]], what: str) -> None:
    def visit(node, stack, done):
        if node in stack:
            raise AssertionError(f"{what} import cycle: " + " → ".join([*stack[stack.index(node):], node]))
        if node in done:
            return
        for target in sorted(graph[node]):
            visit(target, [*stack, node], done)
        done.add(node)

    done: set[str] = set()
    for name in sorted(graph):
        visit(name, [], done)


def package(module: str) -> str:
    """The layer of a module: `jobs` for the job layer (every rule's job module and workflow_scripts.jobs, one layer
    above the libraries), else its stage package workflow_scripts.<package>.… (the top-level __init__ is its own)."""
    if ".jobs." in module or module.startswith("workflow_scripts.jobs"):
        return "jobs"
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def test_no_import_cycle():
    assert_acyclic(GRAPH, "module")


def test_no_package_import_cycle():
    """Stages layer: a package may import a lower one, never one that imports it back (even through other modules,
    which the module-level test cannot see), so e.g. routing prices a policy with the `cost` library and `cost`
    never imports routing."""
    packages: dict[str, set[str]] = {}
    for name, targets in GRAPH.items():
        packages.setdefault(package(name), set()).update(package(target) for target in targets if package(target) != package(name))
    assert_acyclic(packages, "package")


def test_core_imports_no_stage():
    for name, targets in GRAPH.items():
        if name.startswith("workflow_scripts.core"):
            assert all(target.startswith("workflow_scripts.core") for target in targets), (name, targets)


def test_every_module_opens_with_an_in_out_docstring():
    for name, path in MODULES.items():
        docstring = ast.get_docstring(ast.parse(path.read_text()))
        assert docstring, f"{name} has no docstring"
        if path.name != "__init__.py" and len(path.read_text().splitlines()) > 40:  # a module, not a constant list
            assert re.search(r"^\s*In\b", docstring, re.MULTILINE) and re.search(r"\b[Oo]ut\b", docstring), f"{name}: no In/Out"


def test_every_rule_script_is_a_module_of_the_package():
    scripts = {
        match.group(1)
        for smk in (PROJECT_ROOT / "rules").glob("*.smk")
        for match in re.finditer(r'script:\s*"\.\./(workflow_scripts/[^"]+\.py)"', smk.read_text())
    }
    assert scripts and all((PROJECT_ROOT / script).is_file() for script in scripts)
    for script in scripts:
        assert "run_job(main, snakemake" in (PROJECT_ROOT / script).read_text(), f"{script} is not a rule entry point"


def test_each_rule_runs_the_job_module_named_after_it():
    """The rule → module mapping is the `script:` line alone: rule X runs workflow_scripts/<stage>/jobs/X.py."""
    wrong = []
    for smk in sorted((PROJECT_ROOT / "rules").glob("*.smk")):
        for block in re.split(r"^\s*rule (?=\w+:)", smk.read_text(), flags=re.MULTILINE)[1:]:
            rule = block.split(":", 1)[0]
            script = re.search(r'script:\s*"\.\./(workflow_scripts/[^"]+\.py)"', block)
            if script and not re.fullmatch(rf"workflow_scripts/\w+/jobs/{rule}\.py", script.group(1)):
                wrong.append(f"{smk.name}: rule {rule} runs {script.group(1)}")
    assert wrong == []


def code_references(path: Path) -> Counter:
    """How often each name is used as code in `path`: a Python module's loaded names, attributes and imported
    names (its AST, so docstrings, comments and assignments do not count); a rules file's name tokens (Snakemake
    is not Python, but its tokens are: comments and strings are separate tokens)."""
    if path.suffix == ".py":
        found = Counter()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Store):
                found[node.id] += 1
            elif isinstance(node, ast.Attribute):
                found[node.attr] += 1
            elif isinstance(node, ast.alias):
                found[node.name.rsplit(".", 1)[-1]] += 1
        return found
    tokens = tokenize.generate_tokens(io.StringIO(path.read_text()).readline)
    return Counter(token.string for token in tokens if token.type == tokenize.NAME)


def defined_names(node: ast.stmt) -> list[str]:
    """The names a module-level statement defines: a function, a class, or assignment targets."""
    if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
        return [node.name]
    targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
    return [name.id for target in targets for name in ast.walk(target) if isinstance(name, ast.Name)]


def test_every_public_name_is_used_by_the_code_outside_the_tests():
    """No test-only or unused production code: each public module-level function, class and constant of the
    package is used as code by the package, the rules, the Snakefile or a benchmark. Mentions in docstrings,
    comments and strings do not count (a name used only by tests, or only named in prose, is dead code)."""
    sources = [*MODULES.values(), *(PROJECT_ROOT / "rules").rglob("*.smk"), PROJECT_ROOT / "Snakefile",
               *(PROJECT_ROOT / "benchmarks").glob("*.py")]
    used = sum((code_references(path) for path in sources), Counter())
    unused = [f"{name}.{defined}" for name, path in MODULES.items() for node in ast.parse(path.read_text()).body
              for defined in defined_names(node) if not defined.startswith("_") and defined != "main"
              and not used[defined]]
    assert unused == []


def test_the_dead_code_check_ignores_prose(tmp_path):
    module = tmp_path / "m.py"
    module.write_text('"""Mentions helper and LIMIT."""\n# helper(LIMIT)\nLIMIT = 3\ndef helper():\n    return "helper"\n')
    assert not code_references(module)["helper"] and not code_references(module)["LIMIT"]
    assert defined_names(ast.parse(module.read_text()).body[1]) == ["LIMIT"]
    rules = tmp_path / "r.smk"
    rules.write_text('# helper\nrule a:\n    params:\n        x=helper(LIMIT),\n    shell: "helper"\n')
    assert code_references(rules)["helper"] == 1 and code_references(rules)["LIMIT"] == 1


def test_rules_are_formatted_by_snakefmt():
    """Snakemake's own style (the workflow catalog checks it): `snakefmt --check` at pyproject.toml's line length."""
    import subprocess
    import sys

    snakefmt = Path(sys.executable).parent / "snakefmt"
    process = subprocess.run([str(snakefmt), "--check", "Snakefile", "rules"], cwd=PROJECT_ROOT,
                             capture_output=True, text=True)
    assert process.returncode == 0, f"run `.venv/bin/snakefmt Snakefile rules`:\n{process.stderr[-2000:]}"


def is_job_module(name: str) -> bool:
    """A module of the job layer: a rule's job module (`<stage>/jobs/*.py`) or the job runtime and generic gather
    (`workflow_scripts.jobs`). Everything else is library code."""
    return ".jobs." in name or name.startswith("workflow_scripts.jobs")


def sees_the_job(path: Path) -> bool:
    """The module names the Snakemake object (`snakemake`, or an `smk` variable or parameter), docstrings aside."""
    nodes = list(ast.walk(ast.parse(path.read_text())))
    return any(isinstance(node, ast.Name) and node.id in ("smk", "snakemake") for node in nodes) or any(
        isinstance(node, ast.arg) and node.arg == "smk" for node in nodes)


def test_only_job_modules_see_the_snakemake_object():
    seeing = {name for name, path in MODULES.items() if sees_the_job(path) and not is_job_module(name)}
    assert seeing == set(), "library code must take plain values; read the job in a jobs/ module"
    for name, path in MODULES.items():
        if re.fullmatch(r"workflow_scripts\.\w+\.jobs\.\w+", name) and not name.startswith("workflow_scripts.jobs"):
            text = path.read_text()
            assert "run_job(main, snakemake)" in text and "smk.rule" not in text, f"{name}: one rule, one main"


def test_no_library_module_imports_the_job_layer():
    """The job layer sits on top: library packages never import a job module, the runtime or the gather."""
    upward = {name: sorted(target for target in targets if is_job_module(target))
              for name, targets in GRAPH.items() if not is_job_module(name)}
    assert {name: targets for name, targets in upward.items() if targets} == {}


def rule_names() -> set[str]:
    """Every rule the rules files define by name (`rule X:`), and each sharded stage's `<stage>_gather`."""
    names = {match.group(1) for smk in (PROJECT_ROOT / "rules").rglob("*.smk")
             for match in re.finditer(r"^\s*rule (\w+):", smk.read_text(), flags=re.MULTILINE)}
    return names | {f"{name}_gather" for name in names}


def string_constants(path: Path) -> list[tuple[int, str]]:
    """The string constants of a module's code (docstrings aside), with their line numbers; the name of a table's
    contract (`name=`, which may be the name of the rule that writes it) aside too."""
    tree = ast.parse(path.read_text())
    skipped = {id(node.body[0].value) for node in ast.walk(tree)
               if isinstance(node, (ast.Module, ast.FunctionDef, ast.ClassDef)) and node.body
               and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}
    skipped |= {id(keyword.value) for node in ast.walk(tree) if isinstance(node, ast.Call)
                for keyword in node.keywords if keyword.arg == "name"}
    return [(node.lineno, node.value) for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skipped]


def config_keys() -> set[str]:
    """Every key the config schema defines, at any depth (`splits`, `rerank`, `generate_questions` are config keys
    as well as rule names), but those of `shards`, which are the shardable stages' rule names."""
    import yaml

    def keys(node) -> set[str]:
        if isinstance(node, dict):
            found = set(node["properties"]) if isinstance(node.get("properties"), dict) else set()
            return found | {key for value in node.values() for key in keys(value)}
        return {key for value in node for key in keys(value)} if isinstance(node, list) else set()

    schema = yaml.safe_load(next(PACKAGE.rglob("config.schema.yaml")).read_text())
    del schema["properties"]["shards"]
    return keys(schema)


def test_no_rule_name_is_spelled_outside_the_rules_and_job_modules():
    """Library code dispatches on what a stage declares (a cost source's kind, a table's contract), never on the
    name of the rule that ran it: a new stage is wired in the rules alone. Messages may name a rule to rerun
    (an f-string's text: `rule X`, `rerun X`); a bare constant equal to a rule's name may not, unless it is also
    a config key."""
    names = rule_names() - config_keys()
    assert {"retrieve_bm25", "generate_answers", "run_arm", "route_features", "cost_ledger"} <= names
    spelled = [f"{path.relative_to(PROJECT_ROOT)}:{line} {value!r}" for name, path in MODULES.items()
               if not is_job_module(name) for line, value in string_constants(path) if value in names]
    assert spelled == []


RAW_PARQUET_WRITERS = {"workflow_scripts.core.tables", "workflow_scripts.core.atomic"}


def test_every_table_is_written_through_its_contract():
    """A Parquet table is written by `tables.write_table` / `TableWriter` (conformed to its contract on write),
    never by a bare writer elsewhere (a sharded stage's gather writes through the contracts its rule names)."""
    bare = []
    for name, path in MODULES.items():
        if name in RAW_PARQUET_WRITERS:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call):
                called = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
                if called in ("write_parquet_atomic", "write_parquet"):
                    bare.append(f"{path.relative_to(PROJECT_ROOT)}:{node.lineno} {called}")
    assert bare == []


def test_every_csv_report_is_written_through_its_contract():
    """A CSV report is written by `tables.write_report` (conformed to its contract in `contracts.REPORTS`), never by
    polars' `write_csv` elsewhere."""
    bare = [f"{path.relative_to(PROJECT_ROOT)}:{node.lineno}"
            for name, path in MODULES.items() if name != "workflow_scripts.core.tables"
            for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "write_csv"]
    assert bare == []


def test_every_contract_of_the_registry_is_used_by_production():
    from workflow_scripts.core import contracts, tables

    registries = {**contracts.CONTRACTS, **contracts.REPORTS}
    assert not set(contracts.CONTRACTS) & set(contracts.REPORTS)
    registered = [name for name, value in vars(contracts).items()
                  if isinstance(value, tables.Contract) and registries.get(value.name) is value]
    assert len(registered) + len(contracts.REVIEW_SHEETS) == len(registries)
    registered.append("REVIEW_SHEETS")  # one contract per judge, looked up by the judge's name
    sources = [path for name, path in MODULES.items() if name != "workflow_scripts.core.contracts"]
    used = sum((code_references(path) for path in [*sources, *(PROJECT_ROOT / "rules").rglob("*.smk")]), Counter())
    assert [name for name in registered if not used[name]] == []


def test_every_line_of_the_package_is_within_the_formatters_width():
    """pyproject.toml's line length (120) holds for code, docstrings and comments alike."""
    long = [f"{path.relative_to(PROJECT_ROOT)}:{number}" for path in MODULES.values()
            for number, line in enumerate(path.read_text().splitlines(), 1) if len(line) > 120]
    assert long == [], "wrap these lines (black --line-length 120 --line-ranges N-N for code)"
