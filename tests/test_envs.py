"""envs/*.yaml pin exactly what pyproject.toml pins, so conda users and pip users run the same versions."""

import tomllib

import pytest
import yaml

ENV_EXTRAS = {"cpu.yaml": "cpu", "gpu.yaml": "gpu"}


def pins(requirements) -> dict[str, str]:
    pairs = (line.split("#")[0].strip().split("==") for line in requirements if "==" in line)
    return {name.strip().lower(): version.strip() for name, version in pairs}


@pytest.mark.parametrize("env_file, extra", sorted(ENV_EXTRAS.items()))
def test_env_file_matches_pyproject(project_root, env_file, extra):
    project = tomllib.loads((project_root / "pyproject.toml").read_text())["project"]
    expected = pins(project["dependencies"]) | pins(project["optional-dependencies"][extra])
    environment = yaml.safe_load((project_root / "envs" / env_file).read_text())
    pip_section = next(entry["pip"] for entry in environment["dependencies"] if isinstance(entry, dict))
    assert pins(pip_section) == expected
    assert any(line.startswith("-e ..") for line in pip_section), "the env must install this project"
