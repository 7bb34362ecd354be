"""What the wheel ships: the license, the finding pages ``graphcheck explain`` reads, tomli on Python 3.10;
and what the sdist ships beside the code: the README, the changelog and the license."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import tarfile
import zipfile

import pytest

from tests.test_cli import ROOT


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    if importlib.util.find_spec("hatchling") is None:  # a declared test dependency: its absence fails, never skips
        pytest.fail("building the wheel needs hatchling, a test dependency: pip install -e '.[test]'")
    out = tmp_path_factory.mktemp("dist")
    subprocess.run([sys.executable, "-m", "hatchling", "build", "-t", "wheel", "-d", str(out)], cwd=ROOT,
                   check=True, capture_output=True, timeout=300)  # fmt: skip
    (path,) = out.glob("graphcheck-*.whl")
    return path


def test_the_wheel_ships_the_license_and_the_finding_pages(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    (license_file,) = [n for n in names if n.endswith(".dist-info/licenses/LICENSE")]
    text = zipfile.ZipFile(wheel).read(license_file).decode()
    assert "Apache License" in text and "Version 2.0, January 2004" in text
    assert "graphcheck/_findings/scalar-drift.md" in names
    assert "graphcheck/_findings/examples/scalar_drift.py" in names
    assert "graphcheck/_findings/examples/output/scalar_drift-1.txt" in names
    metadata = next(n for n in names if n.endswith(".dist-info/METADATA"))
    requires = [line for line in zipfile.ZipFile(wheel).read(metadata).decode().splitlines() if "tomli" in line]
    assert requires == ["Requires-Dist: tomli>=1.1; python_version < '3.11'"], requires


def test_explain_reads_its_pages_from_the_installed_wheel(wheel, tmp_path):
    zipfile.ZipFile(wheel).extractall(tmp_path)  # what pip puts in site-packages
    env = dict(os.environ, PYTHONPATH=str(tmp_path))
    done = subprocess.run(
        [sys.executable, "-c", "from graphcheck.explain import explain, pages_dir; print(pages_dir()); "
         "print(explain('stale-pointer'))"],
        cwd=tmp_path, env=env, capture_output=True, text=True, check=True,
    )  # fmt: skip
    where, page = done.stdout.split("\n", 1)
    assert where == str(tmp_path / "graphcheck" / "_findings")
    assert page.startswith("# stale-pointer\n") and "    graphcheck:" in page


def test_the_sdist_ships_the_readme_the_changelog_and_the_license(tmp_path):
    subprocess.run([sys.executable, "-m", "hatchling", "build", "-t", "sdist", "-d", str(tmp_path)], cwd=ROOT,
                   check=True, capture_output=True, timeout=300)  # fmt: skip
    (path,) = tmp_path.glob("graphcheck-*.tar.gz")
    with tarfile.open(path) as sdist:
        names = {name.split("/", 1)[1] for name in sdist.getnames() if "/" in name}
    assert {"README.md", "CHANGELOG.md", "LICENSE", "pyproject.toml"} <= names
