"""Every command the README shows, run as typed (issue 33).

Each ```sh block of README.md is one test: its text, unchanged, runs as a bash script
(``set -eo pipefail``, so any failing command fails it) in a scratch copy of the working
tree, with the project's ``.venv`` activated as the README's own blocks do, and with the one
documented override, ``RALP_SMOKE=1`` (bench/core/config.py ``smoke``: runs take one warm-up and at
most two timed steps, one repeat; a sweep runs the first point of each strategy and of each grid). The usage
lines of ``examples/*.py`` docstrings (``ralp-bench ...``, ``python examples/...``) and the examples
of every command's ``--help`` run the same way.

A block may be preceded by ``<!-- readme-test: skip: REASON -->``: it is then reported as
skipped with that reason (for ``./ci/test``, which is what runs this file, and for commands
that need hosts this machine does not have). A command that serves until stopped
(``asv preview``) is started, its page fetched, and then stopped.

Why a scratch copy: commands such as ``ralp-bench run`` write rows into ``results/`` of the
directory they run in, and a README test must not add rows to the committed store.
"""
import os
import re
import shutil
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional

import pytest

from tests.conftest import ROOT

README = ROOT / "README.md"
FENCE = re.compile(r"(?:^<!--\s*readme-test:\s*(?P<mark>.*?)\s*-->\n)?^```sh\n(?P<body>.*?)^```", re.M | re.S)
SERVERS = ("asv preview",)  # commands that serve until stopped
BLOCK_TIMEOUT_S = 1800
# Defined in every block's prelude: start a server, wait for its URL, fetch it, stop it.
SERVE = r'''
serve() {
  python - "$@" <<'PY'
import os, re, signal, subprocess, sys, tempfile, time, urllib.request
# Start the server in its own session with only stdin/out/err (close_fds: it must not hold the
# test's pipe open), wait for the URL it prints, fetch the page, then stop it with SIGTERM (a
# background job of a script ignores SIGINT).
log = tempfile.NamedTemporaryFile("w+", suffix=".log", delete=False)
proc = subprocess.Popen(sys.argv[1:], stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                        start_new_session=True, close_fds=True)
url, deadline = None, time.monotonic() + 120
while url is None and time.monotonic() < deadline and proc.poll() is None:
    time.sleep(1)
    found = re.search(r"http://[0-9a-z.:]+/?", open(log.name).read())
    url = found.group(0) if found else None
try:
    if url is None:
        sys.exit(f"serve: {' '.join(sys.argv[1:])} printed no URL:\n{open(log.name).read()[-2000:]}")
    with urllib.request.urlopen(url, timeout=30) as r:
        assert r.status == 200, r.status
        print(f"served {url}: {len(r.read())} bytes")
finally:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    os.unlink(log.name)
PY
}
'''


@dataclass(frozen=True)
class Block:
    source: str          # README.md:LINE or examples/FILE.py
    body: str            # the commands, as typed
    skip: Optional[str]  # the reason it is not run here, or None

    def script(self) -> str:
        lines = []
        for line in self.body.splitlines():
            stripped = line.lstrip()
            server = next((s for s in SERVERS if stripped.startswith(s)), None)
            lines.append(line.replace(server, "serve " + server, 1) if server else line)
        return "set -eo pipefail\n" + SERVE + "\n".join(lines) + "\n"


def readme_blocks(text: str, source: str = "README.md") -> List[Block]:
    """The ```sh blocks of a Markdown text, with their skip marks."""
    blocks = []
    for m in FENCE.finditer(text):
        mark = m.group("mark")
        skip = None
        if mark is not None:
            kind, _, reason = mark.partition(":")
            if kind.strip() != "skip" or not reason.strip():
                raise ValueError(f"{source}: readme-test mark must be 'skip: REASON', got {mark!r}")
            skip = reason.strip()
        line = text[:m.start("body")].count("\n") + 1
        blocks.append(Block(f"{source}:{line}", m.group("body"), skip))
    return blocks


def example_blocks() -> List[Block]:
    """The usage lines of examples/*.py docstrings (lines that start with `ralp-bench` or
    `python examples/`), in order: one block per file."""
    blocks = []
    for path in sorted((ROOT / "examples").rglob("*.py")):
        lines = [ln.strip() for ln in path.read_text().splitlines()
                 if ln.strip().startswith(("ralp-bench ", "python examples/"))]
        if lines:
            blocks.append(Block(str(path.relative_to(ROOT)), "\n".join(lines) + "\n", None))
    return blocks


def help_blocks() -> List[Block]:
    """The examples of every command's ``--help`` (bench/commands/help_examples.py writes them), one block per
    command; read from the parser the CLI builds, so a new example is run without a list here."""
    from bench.cli import build_parser

    blocks = []
    parser = build_parser()
    for action in parser._subparsers._group_actions:
        for name, sub in action.choices.items():
            lines = [ln.strip() for ln in (sub.epilog or "").splitlines() if ln.startswith("  ralp-bench ")]
            if lines:
                blocks.append(Block(f"ralp-bench {name} --help", "\n".join(lines) + "\n", None))
    return blocks


def command(line: str) -> str:
    """A block's line as a command: its comment and surrounding spaces dropped."""
    return line.split("#", 1)[0].strip()


def not_in(blocks: List[Block], seen: List[Block]) -> List[Block]:
    """``blocks`` without the commands a block of ``seen`` already runs verbatim (an example
    file's usage line repeated in the README runs once), and without blocks left empty."""
    typed = {command(ln) for b in seen for ln in b.body.splitlines()}
    out = []
    for b in blocks:
        lines = [ln for ln in b.body.splitlines() if command(ln) not in typed]
        if lines:
            out.append(Block(b.source, "\n".join(lines) + "\n", b.skip))
    return out


README_BLOCKS = readme_blocks(README.read_text())
ALL_BLOCKS = README_BLOCKS + not_in(example_blocks() + help_blocks(), README_BLOCKS)


def test_blocks_are_found_and_every_skip_says_why():
    """The parser sees the README's blocks (a renamed fence would silently test nothing)."""
    assert len(ALL_BLOCKS) >= 5
    runnable = [b for b in ALL_BLOCKS if b.skip is None]
    assert len(runnable) >= 4
    assert any("ralp-bench run" in b.body for b in runnable)
    assert {"ralp-bench run --help", "ralp-bench analyze --help", "ralp-bench sweep --help"} <= {
        b.source for b in help_blocks()}
    typed = {command(ln) for b in ALL_BLOCKS for ln in b.body.splitlines()}
    assert all(command(ln) in typed for b in help_blocks() for ln in b.body.splitlines())  # each once, none lost
    with pytest.raises(ValueError):
        readme_blocks("<!-- readme-test: skip -->\n```sh\nls\n```\n")


def test_the_parser_keeps_a_block_as_typed():
    text = "intro\n\n```sh\nralp-bench doctor   # a comment\nasv preview\n```\n"
    (block,) = readme_blocks(text)
    assert block.body == "ralp-bench doctor   # a comment\nasv preview\n"
    assert "serve asv preview" in block.script() and block.source == "README.md:4"


def test_each_block_takes_down_the_clusters_it_brings_up():
    body = "ralp-bench cluster up --hosts 3\nralp-bench cluster up --hosts 2 --ssh --name ralpx --no-link-check\n"
    assert cluster_names(body) == ["ralp", "ralpx"] and cluster_names("ralp-bench cluster status\n") == []


@pytest.fixture(scope="module")
def scratch(tmp_path_factory):
    """A copy of the working tree (git history included, for asv), sharing the project's .venv."""
    dest = tmp_path_factory.mktemp("readme") / "ralp-bench"
    shutil.copytree(ROOT, dest, symlinks=True,
                    ignore=shutil.ignore_patterns(".venv", ".asv", "__pycache__", ".pytest_cache"))
    (dest / ".venv").symlink_to(ROOT / ".venv")
    yield dest
    _install_back_here()


def _imported_from() -> Path:
    """Where the project's venv imports ``bench`` from, seen from a directory outside the tree."""
    out = subprocess.run([str(ROOT / ".venv" / "bin" / "python"), "-c", "import bench; print(bench.__file__)"],
                         cwd="/", capture_output=True, text=True, timeout=120)
    return Path(out.stdout.strip()).resolve().parent.parent if out.returncode == 0 else Path("/nonexistent")


def _install_back_here():
    """The README's ``./ci/main`` installs the project editable from where it runs: in the scratch
    copy, whose .venv is this tree's, that points this tree's venv at the scratch copy, which
    pytest deletes later (found: after the suite ``ralp-bench`` ran a stale copy, then none).
    Install it back from here, and check."""
    if _imported_from() != ROOT:
        subprocess.run([str(ROOT / ".venv" / "bin" / "python"), "-m", "pip", "install", "-q", "--no-deps", "-e",
                        str(ROOT)], cwd=ROOT, capture_output=True, timeout=600, check=True)
    assert _imported_from() == ROOT, f"the venv imports bench from {_imported_from()}, not {ROOT}"


def cluster_names(body: str):
    """The clusters a block brings up with `cluster up` (``--name NAME``, else the default)."""
    return sorted({m.group(2) or "ralp" for m in re.finditer(r"cluster up([^\n]*?--name (\S+))?", body)})


def _remove_manual_clusters(block, cwd):
    """`cluster up` leaves a cluster for the user; a block that failed half-way must not: the
    clusters it brings up are taken down after it, its own only (another test process may be
    running another block's, tests/conftest.py)."""
    for name in cluster_names(block.body):
        subprocess.run([str(ROOT / ".venv" / "bin" / "ralp-bench"), "cluster", "down", "--name", name], cwd=cwd,
                       capture_output=True, timeout=120)


@pytest.mark.timeout(BLOCK_TIMEOUT_S + 60)
@pytest.mark.parametrize("block", ALL_BLOCKS, ids=[b.source for b in ALL_BLOCKS])
def test_readme_command_runs_as_typed(block, scratch):
    if block.skip:
        pytest.skip(block.skip)
    venv = ROOT / ".venv"
    env = {**os.environ, "RALP_SMOKE": "1", "TF_CPP_MIN_LOG_LEVEL": "2", "VIRTUAL_ENV": str(venv),
           "PATH": f"{venv / 'bin'}:{os.environ.get('PATH', '')}"}
    env.pop("PYTHONPATH", None)
    proc = subprocess.Popen(["bash", "-c", block.script()], cwd=scratch, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=BLOCK_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGINT)
        out, _ = proc.communicate(timeout=120)
        pytest.fail(f"{block.source} still running after {BLOCK_TIMEOUT_S} s:\n{out[-4000:]}")
    finally:
        _remove_manual_clusters(block, scratch)
    print(out[-6000:])
    assert proc.returncode == 0, f"{block.source} failed (exit {proc.returncode}):\n{block.body}\n---\n{out[-6000:]}"
    assert "Traceback (most recent call last)" not in out, f"{block.source} printed a traceback:\n{out[-6000:]}"
