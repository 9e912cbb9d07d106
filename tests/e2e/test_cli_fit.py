"""`hotshard fit` and the CLI conventions, run as a user would (a subprocess)."""

import json

import pytest

from tests.conftest import run_cli, shared


def test_every_subcommand_has_help():
    top = run_cli("--help")
    assert top.returncode == 0
    # a command's line starts two spaces in; a wrapped description continues further in
    commands = [line.split()[0] for line in top.stdout.split("Commands:")[1].splitlines()
                if line.startswith("  ") and not line.startswith("   ")]
    assert {"fit", "demo"} <= set(commands)
    for name in commands:
        res = run_cli(name, "--help")
        assert res.returncode == 0, name
        assert len(res.stdout.splitlines()) > 5, f"{name} --help says too little"


def test_fit_words_summary():
    res = run_cli("fit", str(shared("csn", "words.txt")))
    assert res.returncode == 0, res.stderr
    assert "alpha            1.9527" in res.stdout
    assert "x >= 7: 2,958 observations" in res.stdout


def test_fit_json_has_the_contract_fields():
    res = run_cli("fit", str(shared("csn", "terrorism.txt")), "--json", "--bootstrap", "20",
                  "--seed", "1", "--compare", "lognormal,exponential")
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    for key in ("alpha", "alpha_se", "xmin", "n", "n_tail", "ks", "p_value", "compare"):
        assert key in out
    assert out["xmin"] == 12
    assert set(out["compare"]) == {"lognormal", "exponential"}
    assert 0 <= out["p_value"] <= 1


def test_fit_weblinks_histogram_notes_zeros(tmp_path):
    out_file = tmp_path / "fit.json"
    res = run_cli("fit", str(shared("csn", "weblinks.hist")), "--histogram", "--xmin", "3684",
                  "-o", str(out_file))
    assert res.returncode == 0, res.stderr
    assert "hotshard: note: dropped 35,159,835 zero values" in res.stderr
    saved = json.loads(out_file.read_text())
    assert saved["alpha"] == pytest.approx(2.336, abs=0.01)
    assert saved["n_tail"] == 28986


def test_fit_reads_stdin():
    res = run_cli("fit", "-", "--json", stdin="\n".join(str(v) for v in range(1, 200)) + "\n")
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["n"] == 199


def test_bootstrap_same_for_any_workers():
    args = ("fit", str(shared("csn", "terrorism.txt")), "--bootstrap", "16", "--seed", "5",
            "--json")
    one = json.loads(run_cli(*args, "--workers", "1").stdout)
    two = json.loads(run_cli(*args, "--workers", "2").stdout)
    assert one["p_value"] == two["p_value"]
    assert one["bootstrap"] == two["bootstrap"]


@pytest.mark.parametrize(
    ("setup", "args", "message"),
    [
        (None, ["fit", "missing.txt"], "no such file: missing.txt"),
        ("", ["fit", "in.txt"], "in.txt is empty"),
        ("1\n2.5\n3\n", ["fit", "in.txt"], "observations must be integers, got 2.5"),
        ("1\n-4\n3\n", ["fit", "in.txt"], "observations must be >= 0, got -4"),
        ("5\n" * 50, ["fit", "in.txt"], "all 50 observations equal 5"),
        ("1\n2\n3\n", ["fit", "in.txt"], "too few observations"),
        ("1\n2\n", ["fit", "in.txt", "--xmin", "0"], "--xmin"),
        ("1\n2\n", ["fit", "in.txt", "--compare", "gamma"], "unknown alternative 'gamma'"),
        ("a,b\n1,2\n", ["fit", "in.txt", "--column", "zz"], "no column 'zz'"),
        (None, ["fit", "."], "is a directory"),
        (None, ["nosuchcommand"], "No such command"),
    ],
)
def test_user_mistakes_are_one_line_exit_2(tmp_path, setup, args, message):
    if setup is not None:
        (tmp_path / "in.txt").write_text(setup)
    res = run_cli(*args, cwd=tmp_path)
    assert res.returncode == 2
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, res.stderr
    assert lines[0].startswith("hotshard: error: ")
    assert message in lines[0]
    assert "Traceback" not in res.stderr


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("a,b\n1,2\n3,4\n", "t2.csv is a table, not one number per line: its header has "
                            "columns 'a', 'b'; name one of them as the column to read "
                            "(--column NAME)"),
        ("a;b\n1;2\n", "its header has columns 'a', 'b'"),
        ("requests\n1\n2\n", "t2.csv line 1: 'requests' is not a number: if it is a header, "
                              "name 'requests' as the column to read (--column requests)"),
    ],
)
def test_a_table_without_column_lists_its_columns(tmp_path, content, message):
    (tmp_path / "t2.csv").write_text(content)
    res = run_cli("fit", "t2.csv", cwd=tmp_path)
    assert res.returncode == 2
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, res.stderr
    assert lines[0].startswith("hotshard: error: ") and message in lines[0]
    assert "named 'a,b'" not in res.stderr


def test_help_says_column_reads_a_table_with_a_header():
    text = " ".join(run_cli("fit", "--help").stdout.split())
    assert "--column NAME reads the column of that name" in text
    assert "header line" in text


def test_seed_without_bootstrap_is_noted(tmp_path):
    words = str(shared("csn", "words.txt"))
    res = run_cli("fit", words, "--seed", "1")
    assert res.returncode == 0, res.stderr
    assert res.stderr == ("hotshard: note: --seed only matters with --bootstrap N (the fit "
                          "itself is not random): ignoring it\n")
    assert "note" not in run_cli("fit", words).stderr


def test_seed_with_bootstrap_needs_no_note():
    res = run_cli("fit", str(shared("csn", "words.txt")), "--bootstrap", "4", "--seed", "1",
                  "--workers", "1")
    assert res.returncode == 0, res.stderr
    assert "--seed" not in res.stderr


def test_failed_fit_leaves_no_output_file(tmp_path):
    (tmp_path / "in.txt").write_text("5\n" * 50)
    res = run_cli("fit", "in.txt", "-o", "fit.json", cwd=tmp_path)
    assert res.returncode == 2
    assert list(tmp_path.iterdir()) == [tmp_path / "in.txt"]


def test_output_to_missing_directory_is_an_error(tmp_path):
    res = run_cli("fit", str(shared("csn", "words.txt")), "-o", str(tmp_path / "no" / "f.json"))
    assert res.returncode == 2
    assert "does not exist" in res.stderr
