"""Every example in README.md and the docs site (docs/**/*.md) runs, and the site builds.

Which blocks run, by convention:

- A fenced block whose info string is exactly ``sh`` is run, command by command, in order,
  page by page. A page's commands share one working directory, so a command may read what an
  earlier command of the same page wrote (its ``-o``); pages do not share files.
- A command ends at a line that does not end with ``\\``. It must exit 0, unless its trailing
  comment states the status: ``# FAIL`` means 1 (``check``'s verdict), ``# exit N`` means N.
- A comment line that contains the word "placeholder" opens a paragraph of the user's own
  files (as the README's tour marks them: ``tests/test_readme_tour.py``); its commands are not
  run. The paragraph ends at a blank line or at the next comment line.
- A block fenced ``sh {.live}`` (a shell block with the class ``live``: pymdownx.superfences
  highlights it as ``sh``, GitHub by its first word) needs something running: a server
  started in the background (``hotshard serve ... &``), a cluster (``URL=$(hotshard cluster
  up ...)``), Locust workers. It is run as ONE bash script, in the page's working directory
  and in its place among the page's blocks, so ``&``, ``%1``, ``$!`` and shell variables
  work across its lines. Its commands are read as an ``sh`` block's (continuations,
  ``# FAIL`` / ``# exit N``, placeholders) and each one's exit status is checked as it
  finishes: the first that differs from its expected status ends the script, failed.
  What the harness adds, around the block's own lines:

  - Ports. A live block names only these fixed ports, each replaced (wherever the number
    stands alone in the block) by one the test picks, so parallel tests never collide:
    ``8080`` and ``8081`` (``serve``) and ``5557`` (Locust's master) each by a free port
    of 127.0.0.1; ``7000`` (``cluster up --port``) by a base P with P..P+N-1 and their bus
    ports P+10000.. free (``tests.cluster._clusters.free_base``; N: the most nodes a
    ``cluster up`` of the block starts, its ``--shards`` times ``--replicas``). A live block
    does not use these numbers for anything else, and gives every port explicitly (no
    ``serve`` or ``cluster up`` on its default port).
  - Background commands. After a command that ends in ``&``, its pid is recorded and, if it
    names ``--port N``, the next command waits until 127.0.0.1:N is ready (polled every 0.1
    s, up to 120 s: a hang guard, not a timing claim; failed at once if the command exits
    first): for ``hotshard serve``, until ``GET /health`` answers 200 (it listens before it
    loads ``--load``, so an accepted connection is not yet a served one); for anything else,
    until the port accepts connections. A background command without ``--port`` (a Locust
    worker) is not waited on. Every server in these pages listens on 127.0.0.1 (``serve``'s
    default; Locust's master is given ``--master-bind-host 127.0.0.1``). The admin token is
    the user's own (``export HOTSHARD_ADMIN_TOKEN=...`` before ``serve``), so the block needs
    nothing read from a server's output.
  - Cleanup, pass or fail (the block's own ``kill %1`` and ``cluster down`` come first):
    every recorded background pid still running gets SIGTERM, then SIGKILL after 10 s;
    ``hotshard cluster down --data DIR`` runs for every ``cluster up --data DIR`` of the
    block whose ``DIR/cluster.json`` is still there, and any of its nodes still alive after
    it is killed; then whatever is left of the script's process group (it runs in a session
    of its own: a server's workers, a Locust worker) gets SIGTERM, then SIGKILL. The test
    fails if anything had to be SIGKILLed or a node outlived ``cluster down``; either way no
    process outlives the test.

  ``HOTSHARD_ADMIN_TOKEN`` and ``REDISCLI_AUTH`` are removed from the environment the blocks
  run in, so a page sets what it uses.
- Any other fence (``console``, ``text``, ``python``, ``yaml``, ``js``...) is not run: output
  shown, or commands that need what is not here (a remote host, Prometheus, k6, a Spark
  cluster) or minutes (``make``, ``demo``).

The working directory is laid out like the checkout: ``TMP/main`` (the cwd) holds a link
``examples`` to the repository's examples/, and ``TMP/shared`` links to the checkout's
``../shared``, so ``examples/...`` and ``../shared/data/...`` resolve as in the docs. ``hotshard``
is the venv's (its bin directory first on PATH).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hotshard.cli import COMMANDS
from tests.cluster._clusters import free_base

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
BIN = Path(sys.executable).parent
TIMEOUT_S = 180
LIVE_TIMEOUT_S = 600   # a whole live block: a hang guard
PORT_WAIT_S = 120      # a background server's port accepting connections: a hang guard
STOP_GRACE_S = 10      # SIGTERM, then SIGKILL

FENCE = re.compile(r"^```([^\n`]*)\n(.*?)^```[ \t]*$", re.M | re.S)
STATUS = re.compile(r"#\s*(?:(FAIL)\b|exit\s+(\d+))")
SH, LIVE = "sh", "sh {.live}"
# the fixed ports a live block may name, each replaced by one the test picks
SERVICE_PORTS = ("8080", "8081", "5557")
CLUSTER_BASE = "7000"
PORT_WORD = re.compile(r"(?<![\w.])(8080|8081|5557|7000)(?!\w)")
PORT_FLAG = re.compile(r"(?<![\w-])--port[= ](\d+)")
NO_PORT = "''"  # a background command without --port: not waited on
# `serve` listens before it loads (a port in use fails first): it is ready when /health is 200
SERVE = re.compile(r"\bhotshard serve\b")


def _pages() -> list[Path]:
    return [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]


def _block_commands(body: str) -> list[tuple[str, int]]:
    """(command, expected exit status) of every command of one block, in order."""
    commands = []
    placeholder, pending = False, ""
    for raw in body.splitlines():
        line = raw.strip()
        if not pending and line.startswith("#"):
            placeholder = "placeholder" in line.lower()
            continue
        if not pending and not line:
            placeholder = False
            continue
        pending += raw.rstrip() + "\n"
        if line.endswith("\\"):
            continue
        if not placeholder:
            last = pending.rstrip().splitlines()[-1]
            comment = last.split("  #", 1)[1] if "  #" in last else ""
            match = STATUS.search("#" + comment) if comment else None
            status = 0 if not match else (1 if match.group(1) else int(match.group(2)))
            commands.append((pending.rstrip(), status))
        pending = ""
    return commands


def _blocks(text: str) -> list[tuple[str, list[tuple[str, int]]]]:
    """Every block that runs, in the page's order: (``sh`` or ``sh {.live}``, commands)."""
    blocks = []
    for info, body in FENCE.findall(text):
        kind = " ".join(info.split())
        if kind in (SH, LIVE):
            commands = _block_commands(body)
            if commands:
                blocks.append((kind, commands))
    return blocks


def _commands(text: str) -> list[tuple[str, int]]:
    """(command, expected exit status) of every ``sh`` command of a page, in order."""
    return [c for kind, commands in _blocks(text) if kind == SH for c in commands]


def _live_blocks(text: str) -> list[list[tuple[str, int]]]:
    return [commands for kind, commands in _blocks(text) if kind == LIVE]


RUNNABLE = [p for p in _pages() if _blocks(p.read_text())]


# -- live blocks ------------------------------------------------------------------------------
_PRELUDE = r"""
__live_ready() {  # PORT [PATH]: whether 127.0.0.1:PORT accepts connections (answers GET PATH)
  if [ -n "$2" ]; then curl -fs -o /dev/null --max-time 2 "http://127.0.0.1:$1$2"
  else (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; fi
}
__live_bg() {  # PID PORT K [PATH]: record a background command; wait until PORT is ready
  echo "$1" >> "$HOTSHARD_LIVE_PIDS"
  [ -n "$2" ] || return 0
  local i
  for ((i = 0; i < POLLS; i++)); do
    if __live_ready "$2" "$4"; then return 0; fi
    if ! kill -0 "$1" 2>/dev/null; then
      echo "live: command $3 exited before 127.0.0.1:$2 was ready" >&2; exit 98
    fi
    sleep 0.1
  done
  echo "live: 127.0.0.1:$2 was not ready within WAIT s" >&2; exit 98
}
__live_check() {  # STATUS EXPECTED K
  if [ "$1" -ne "$2" ]; then echo "live: command $3 exited $1, not $2" >&2; exit 97; fi
}
""".replace("POLLS", str(PORT_WAIT_S * 10)).replace("WAIT", str(PORT_WAIT_S))


def _code(command: str) -> str:
    """The command's last line without its trailing comment (``  #``, as for statuses)."""
    return command.splitlines()[-1].split("  #", 1)[0].rstrip()


def _backgrounded(command: str) -> bool:
    code = _code(command)
    return code.endswith("&") and not code.endswith("&&")


def _cluster_ups(commands: list[tuple[str, int]]) -> list[tuple[int, str]]:
    """(nodes, data directory) of every ``cluster up`` of a block."""
    ups = []
    for command, _ in commands:
        if "cluster up" not in command:
            continue
        shards = re.search(r"(?<![\w-])(?:--shards|-n)[= ](\d+)", command)
        replicas = re.search(r"(?<![\w-])--replicas[= ](\d+)", command)
        data = re.search(r"(?<![\w-])--data[= ]['\"]?([^\s'\")]+)", command)
        nodes = int(shards.group(1) if shards else 3) * int(replicas.group(1) if replicas else 1)
        ups.append((nodes, data.group(1) if data else "hotshard-cluster"))
    return ups


def _free_port(taken: set[int]) -> int:
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port not in taken:
            return port


def _pick_ports(commands: list[tuple[str, int]]) -> dict[str, str]:
    """The block's fixed ports -> the ports the test gives them."""
    used = set(PORT_WORD.findall("\n".join(c for c, _ in commands)))
    ports: dict[str, str] = {}
    taken: set[int] = set()
    for literal in SERVICE_PORTS:
        if literal in used:
            port = _free_port(taken)
            taken.add(port)
            ports[literal] = str(port)
    if CLUSTER_BASE in used:
        nodes = max([n for n, _ in _cluster_ups(commands)] or [3])
        ports[CLUSTER_BASE] = str(free_base(nodes))
    return ports


def _with_ports(text: str, ports: dict[str, str]) -> str:
    return PORT_WORD.sub(lambda m: ports.get(m.group(1), m.group(1)), text)


def _live_script(commands: list[tuple[str, int]], ports: dict[str, str]) -> str:
    """The bash script of a live block: its commands, each followed by its check."""
    lines = [_PRELUDE]
    for k, (command, status) in enumerate(commands, 1):
        text = _with_ports(command, ports)
        lines.append(text)
        if _backgrounded(command):
            port = PORT_FLAG.search(text)
            ready = " /health" if SERVE.search(command) else ""
            lines.append(f"__live_bg $! {port.group(1) if port else NO_PORT} {k}{ready}")
        else:
            lines.append(f"__live_check $? {status} {k}")
    return "\n".join(lines) + "\n"


def _process_group(pid: int) -> int | None:
    """The process group of a live (not zombie) process, else None."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return None if fields[0] in (b"Z", b"X") else int(fields[2])


def _members(pgid: int) -> list[int]:
    """The live processes of process group ``pgid``."""
    return [int(e.name) for e in Path("/proc").iterdir()
            if e.name.isdigit() and _process_group(int(e.name)) == pgid]


def _terminate(pids: list[int], pgid: int) -> list[int]:
    """SIGTERM each of ``pids`` still in group ``pgid``, SIGKILL after STOP_GRACE_S; the pids
    that had to be killed."""
    for pid in pids:
        if _process_group(pid) == pgid:
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_GRACE_S
    while time.monotonic() < deadline and any(_process_group(p) == pgid for p in pids):
        time.sleep(0.1)
    killed = [p for p in pids if _process_group(p) == pgid]
    for pid in killed:
        os.kill(pid, signal.SIGKILL)
    return killed


def _node_alive(pid: int, port: int) -> bool:
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    return _process_group(pid) is not None and f":{port}".encode() in cmdline


class LiveResult:
    def __init__(self, status: int | None, out: str, err: str, leftovers: list[str]):
        self.status, self.out, self.err, self.leftovers = status, out, err, leftovers


def run_live(commands: list[tuple[str, int]], cwd: Path, logs: Path, env: dict) -> LiveResult:
    """Run one live block (see the module's docstring) and stop everything it started.

    ``status`` is the script's exit status (None: it ran past LIVE_TIMEOUT_S); ``leftovers``
    names what was still running after its end and had to be stopped by force (a server
    that ignored SIGTERM, a cluster node ``cluster down`` left)."""
    logs.mkdir(parents=True, exist_ok=True)
    ports = _pick_ports(commands)
    script, pids_file = logs / "block.sh", logs / "pids"
    script.write_text(_live_script(commands, ports))
    pids_file.write_text("")
    clusters = [cwd / _with_ports(data, ports) for _, data in _cluster_ups(commands)]
    out, err = logs / "stdout", logs / "stderr"
    leftovers: list[str] = []
    with out.open("w") as stdout, err.open("w") as stderr:
        proc = subprocess.Popen(["bash", str(script)], cwd=cwd, stdin=subprocess.DEVNULL,
                                stdout=stdout, stderr=stderr, start_new_session=True,
                                env={**env, "HOTSHARD_LIVE_PIDS": str(pids_file)})
    pgid = proc.pid  # its own session: the script and what it starts, but not redis nodes
    status = None
    try:
        try:
            status = proc.wait(LIVE_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            _terminate(_members(pgid), pgid)
            proc.wait(10)
    finally:
        background = [int(p) for p in pids_file.read_text().split()]
        leftovers += [f"background pid {p} (SIGKILL)" for p in _terminate(background, pgid)]
        for directory in clusters:
            state_file = directory / "cluster.json"
            if not state_file.exists():
                continue
            state = json.loads(state_file.read_text())
            subprocess.run([str(BIN / "hotshard"), "cluster", "down", "--data", str(directory)],
                           env=env, capture_output=True, timeout=120, stdin=subprocess.DEVNULL)
            for pid, port in zip(state["pids"], state["ports"], strict=True):
                if _node_alive(pid, port):
                    os.kill(pid, signal.SIGKILL)
                    leftovers.append(f"redis node pid {pid} on port {port} after cluster down")
        rest = _members(pgid)
        leftovers += [f"pid {p} of the block's process group (SIGKILL)"
                      for p in _terminate(rest, pgid)]
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return LiveResult(status, out.read_text(errors="replace"), err.read_text(errors="replace"),
                      leftovers)


def _env() -> dict[str, str]:
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
           "MPLBACKEND": "Agg"}
    for name in ("HOTSHARD_ADMIN_TOKEN", "REDISCLI_AUTH"):
        env.pop(name, None)
    return env


# -- the tests ---------------------------------------------------------------------------------
def test_the_convention_is_read_as_documented():
    text = ("```sh\nhotshard a x.json\n# placeholder: yours\nhotshard b mine.json \\\n"
            "    --flag\n\nhotshard c -o y  # FAIL\nhotshard d  # exit 3\n```\n"
            "```console\n$ hotshard serve\n```\n"
            "```sh {.live}\nhotshard serve --port 8080 &   # Ctrl-C stops it\n"
            "URL=$(hotshard cluster up --shards 2 --replicas 2 --port 7000 --data rc)\n"
            "curl -f localhost:8080/stats  # exit 22\n```\n")
    assert _commands(text) == [("hotshard a x.json", 0), ("hotshard c -o y  # FAIL", 1),
                               ("hotshard d  # exit 3", 3)]
    [live] = _live_blocks(text)
    assert [s for _, s in live] == [0, 0, 22]
    assert _cluster_ups(live) == [(4, "rc")]
    ports = {"8080": "41234", "7000": "12000"}
    script = _live_script(live, ports)
    assert ("hotshard serve --port 41234 &   # Ctrl-C stops it\n"
            "__live_bg $! 41234 1 /health\n") in script
    assert "--port 12000 --data rc)\n__live_check $? 0 2\n" in script
    assert "curl -f localhost:41234/stats  # exit 22\n__live_check $? 22 3\n" in script
    assert "8080" not in script and "7000" not in script


def test_the_pages_hold_examples_to_run():
    names = {p.relative_to(ROOT).as_posix() for p in RUNNABLE}
    assert {"README.md", "docs/index.md", "docs/tasks/profiling.md",
            "docs/tasks/check.md"} <= names, names
    assert sum(len(_commands(p.read_text())) for p in RUNNABLE) > 40
    live = {p.relative_to(ROOT).as_posix() for p in RUNNABLE if _live_blocks(p.read_text())}
    assert {"docs/tasks/serve.md", "docs/tasks/drive.md", "docs/tasks/cluster.md",
            "docs/tasks/simulating.md"} <= live, live


def test_live_blocks_name_their_ports_and_stay_on_loopback():
    """A live block's servers are waited on by their --port, and listen on 127.0.0.1."""
    for page in RUNNABLE:
        for commands in _live_blocks(page.read_text()):
            for command, _ in commands:
                where = f"{page.relative_to(ROOT)}: {command!r}"
                assert "0.0.0.0" not in command, where
                if re.search(r"hotshard (?:serve|cluster up)\b", command):
                    assert PORT_FLAG.search(command), f"{where}: give its --port"
                if "locust" in command and "--master" in command.split():
                    assert "--master-bind-host 127.0.0.1" in command, where


def test_a_live_block_fails_on_a_status_and_stops_what_it_started(tmp_path: Path):
    """The harness itself: a background server waited on, a wrong status caught, and the
    server stopped afterwards (pass or fail)."""
    (tmp_path / "server.py").write_text(
        "import http.server, sys\n"
        "port = int(sys.argv[sys.argv.index('--port') + 1])\n"
        "http.server.HTTPServer(('127.0.0.1', port), http.server.SimpleHTTPRequestHandler)"
        ".serve_forever()\n")
    serve = f"{sys.executable} server.py --port 8080 &  # a server\nhttp_server=$!"
    ok = _block_commands(f"{serve}\ncurl -fsS localhost:8080/ > /dev/null\n"
                         "curl -fsS localhost:8080/missing  # exit 22\nfalse  # FAIL\n")
    res = run_live(ok, tmp_path, tmp_path / "logs-ok", _env())
    assert res.status == 0 and not res.leftovers, (res.err, res.leftovers)
    bad = _block_commands(f"{serve}\necho $http_server > server.pid\nfalse\ntouch never\n")
    res = run_live(bad, tmp_path, tmp_path / "logs-bad", _env())
    assert res.status == 97 and "live: command 4 exited 1, not 0" in res.err, res.err
    assert not (tmp_path / "never").exists()
    pid = int((tmp_path / "server.pid").read_text())
    assert _process_group(pid) is None, "the background server outlived its block"
    assert not res.leftovers, res.leftovers  # it stopped on SIGTERM
    dead = _block_commands("bash -c 'exit 2' --port 8080 &\ntouch never\n")
    res = run_live(dead, tmp_path, tmp_path / "logs-dead", _env())
    assert res.status == 98 and "command 1 exited before 127.0.0.1:" in res.err, res.err


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    main = tmp_path / "main"
    main.mkdir()
    (main / "examples").symlink_to(ROOT / "examples", target_is_directory=True)
    (tmp_path / "shared").symlink_to((ROOT / ".." / "shared").resolve(),
                                     target_is_directory=True)
    return main


@pytest.mark.slow
@pytest.mark.parametrize("page", RUNNABLE, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_example_of_the_page_runs(page: Path, workdir: Path):
    env = _env()
    where = page.relative_to(ROOT)
    for n, (kind, commands) in enumerate(_blocks(page.read_text()), 1):
        if kind == LIVE:
            res = run_live(commands, workdir, workdir.parent / f"live-{n}", env)
            listing = "\n".join(c for c, _ in commands)
            assert res.status is not None, f"{where}: live block ran past {LIVE_TIMEOUT_S} s"
            assert res.status == 0, (f"{where}: live block {n} failed:\n{listing}\n"
                                     f"--- stderr\n{res.err[-3000:]}\n--- stdout\n"
                                     f"{res.out[-1500:]}")
            assert not res.leftovers, f"{where}: live block {n} left {res.leftovers}"
            continue
        for command, status in commands:
            res = subprocess.run(["bash", "-c", command], cwd=workdir, env=env, text=True,
                                 capture_output=True, timeout=TIMEOUT_S,
                                 stdin=subprocess.DEVNULL)
            assert res.returncode == status, (
                f"{where}: {command!r} exited {res.returncode}, not {status}\n"
                f"{res.stderr[-2000:]}")


def test_every_command_has_a_cli_reference_page():
    nav = (ROOT / "mkdocs.yml").read_text()
    for name, (module, function, _) in COMMANDS.items():
        page = DOCS / "cli" / f"{name}.md"
        assert page.exists(), f"no CLI reference page for {name}"
        text = page.read_text()
        assert "::: mkdocs-click" in text, page
        for option in (f":module: {module}", f":command: {function}",
                       f":prog_name: hotshard {name}", ":style: table"):
            assert option in text, f"{page}: missing {option}"
        assert f"cli/{name}.md" in nav, f"{name}'s page is not in the nav"


def test_the_api_page_documents_every_public_name():
    import hotshard

    text = (DOCS / "api.md").read_text()
    for name in hotshard.__all__:
        assert f"hotshard.{name}`" in text, f"docs/api.md does not document {name}"


def test_the_readme_is_a_front_door_whose_links_work():
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 250
    links = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", text)
    local = [link for link in links if "://" not in link]
    assert len(local) > 15
    missing = [link for link in local if not (ROOT / link).exists()]
    assert not missing, missing


@pytest.mark.slow
def test_the_site_builds_strict_with_real_option_tables(tmp_path: Path):
    mkdocs = shutil.which("mkdocs", path=str(BIN))
    assert mkdocs, "mkdocs is not installed: pip install -e '.[docs]'"
    site = tmp_path / "site"
    res = subprocess.run([mkdocs, "build", "--strict", "-q", "-d", str(site)], cwd=ROOT,
                         capture_output=True, text=True, timeout=300,
                         env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert res.returncode == 0, res.stderr[-3000:]
    for name in COMMANDS:
        html = (site / "cli" / f"{name}.html").read_text()
        assert "Sentinel.UNSET" not in html, name
        rows = re.findall(r"<tr>\s*<td><code>(-[^<]*)</code>", html)
        assert len(rows) >= 2, f"{name}: no option table ({len(rows)} rows)"
        assert "<code>--help</code>" in html, name
    generate = (site / "cli" / "generate.html").read_text()
    assert "<code>--messages</code>" in generate
    blocks = [re.sub(r"<[^>]+>", "", b) for b in re.findall(r"<pre.*?</pre>", generate, re.S)]
    assert any(b.lstrip().startswith("Examples:") for b in blocks), "examples not as a block"
    for group in ("cluster", "observe"):
        assert "Subcommands" in (site / "cli" / f"{group}.html").read_text(), group
    api = (site / "api.html").read_text()
    assert "doc-function" in api and "doc-class" in api, "the API page has no docstrings"
