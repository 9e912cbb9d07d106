"""The package root's public API: every name in ``__all__`` is real, loads lazily, and the
library tour (docs/api.md) runs as written."""

from __future__ import annotations

import subprocess
import sys

import pytest

import hotshard
from tests.conftest import ROOT


@pytest.mark.parametrize("name", hotshard.__all__)
def test_every_public_name_resolves(name):
    assert getattr(hotshard, name) is not None
    assert name in dir(hotshard)


def test_all_is_exactly_the_public_api():
    public = {n for n in dir(hotshard) if not n.startswith("_")} - {"annotations",
                                                                      "import_module", "Any"}
    # subpackages imported by other tests show up as attributes; they are not the API
    public -= {n for n in public if type(getattr(hotshard, n)).__name__ == "module"}
    assert public | {"__version__"} == set(hotshard.__all__)
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        _ = hotshard.nope


def test_importing_the_package_loads_nothing_heavy():
    code = ("import sys, hotshard; heavy = [m for m in ('numpy', 'pyarrow', 'numba', 'click', "
            "'hotshard.profile', 'hotshard.sim') if m in sys.modules]; print(heavy)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == "[]"


def test_the_library_tour_runs(tmp_path):
    """The Python API page's library tour (docs/api.md, once the README's "Use it as a
    library"), run as a script (its paths made real)."""
    text = (ROOT / "docs" / "api.md").read_text()
    start = text.index("```python\nimport hotshard")
    block = text[start + len("```python\n"): text.index("```", start + 10)]
    script = block.replace("events.parquet", str(ROOT / "../shared/data/traces/web07.parquet"))
    script = script.replace('key="channel_id"', 'key="key"')
    (tmp_path / "tour.py").write_text(script)
    res = subprocess.run([sys.executable, str(tmp_path / "tour.py")], capture_output=True,
                         text=True, cwd=tmp_path, timeout=300)
    assert res.returncode == 0, res.stderr
    assert "hottest shard" in res.stdout


def test_diagnose_stays_callable_after_its_modules_are_imported():
    """Importing ``hotshard.diagnose.engine`` binds the subpackage to ``hotshard.diagnose``; the
    package is callable, so the public function still works (it did not, before)."""
    code = ("import hotshard.diagnose.engine, hotshard\n"
            "from hotshard import Observations\n"
            f"prod = Observations.load({str(ROOT / 'examples/incident-production.json')!r})\n"
            f"test = Observations.load({str(ROOT / 'examples/incident-loadtest.json')!r})\n"
            "print(hotshard.diagnose(prod, test).ranking[0].cause)")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "key-skew"


def test_the_package_docstring_example_runs(tmp_path):
    """The example at the top of ``hotshard/__init__.py``, run as written (its file names
    made real): a documented example that raises is a defect (it did: rps without capacity)."""
    import hotshard

    doc = hotshard.__doc__
    start = doc.index("    import hotshard")
    lines = []
    for line in doc[start:].splitlines():   # the indented block, blank lines within it kept
        if line.strip() and not line.startswith("    "):
            break
        lines.append(line[4:])
    block = "\n".join(lines)
    script = (block.replace('["events.parquet"]',
                            repr([str(ROOT / "../shared/data/traces/web07.parquet")]))
              .replace('key="channel_id"', 'key="key"')
              .replace('"prod.json"', repr(str(ROOT / "examples/incident-production.json"))))
    script += "\nprint(prediction.hottest, run.requests, verdict.ranking[0].cause)\n"
    (tmp_path / "example.py").write_text(script)
    res = subprocess.run([sys.executable, str(tmp_path / "example.py")], capture_output=True,
                         text=True, cwd=tmp_path, timeout=300)
    assert res.returncode == 0, res.stderr
    assert len(res.stdout.split()) == 3
