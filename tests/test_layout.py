"""The package's shape: one subpackage per stage (and `config`, which validates them all), no import cycle, `core`
below every stage, an In/Out docstring on every module, every rule's script inside the package, and no production
function that only tests call."""

import ast
import re
from pathlib import Path

from conftest import PROJECT_ROOT

PACKAGE = PROJECT_ROOT / "workflow_scripts"
STAGES = {"config", "core", "ingest", "retrieval", "llm", "judging", "answers", "routing", "cost", "report", "study_c"}


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


def test_no_import_cycle():
    def visit(node, stack, done):
        if node in stack:
            raise AssertionError("import cycle: " + " → ".join([*stack[stack.index(node):], node]))
        if node in done:
            return
        for target in sorted(GRAPH[node]):
            visit(target, [*stack, node], done)
        done.add(node)

    done: set[str] = set()
    for name in sorted(GRAPH):
        visit(name, [], done)


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


def test_every_public_function_has_a_caller_outside_the_tests():
    """No test-only production code: each public top-level function of the package is used by the package, the
    rules, the Snakefile or a benchmark (a name used only by tests would be dead code)."""
    sources = [path.read_text() for path in MODULES.values()]
    sources += [path.read_text() for path in (PROJECT_ROOT / "rules").glob("*.smk")]
    sources += [path.read_text() for path in (PROJECT_ROOT / "benchmarks").glob("*.py")]
    unused = []
    for name, path in MODULES.items():
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.FunctionDef) and not node.name.startswith("_") and node.name != "main":
                uses = sum(len(re.findall(rf"\b{node.name}\b", text)) for text in sources)
                if uses < 2:  # its own definition only
                    unused.append(f"{name}.{node.name}")
    assert unused == []


def test_rules_are_formatted_by_snakefmt():
    """Snakemake's own style (the workflow catalog checks it): `snakefmt --check` at pyproject.toml's line length."""
    import subprocess
    import sys

    snakefmt = Path(sys.executable).parent / "snakefmt"
    process = subprocess.run([str(snakefmt), "--check", "Snakefile", "rules"], cwd=PROJECT_ROOT,
                             capture_output=True, text=True)
    assert process.returncode == 0, f"run `.venv/bin/snakefmt Snakefile rules`:\n{process.stderr[-2000:]}"
