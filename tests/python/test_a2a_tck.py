"""The official A2A TCK (a2aproject/a2a-tck, branch 1.0-dev) at MUST level over
JSON-RPC, against a freshly started gateway in conformance mode, reached through
the URL its Agent Card announces. Any failed TCK test fails this test.

The TCK is read from ../shared/conformance/a2a-tck (or $A2A_TCK_DIR) and never
copied into the project; without it this test is skipped. Its pinned
dependencies (tck-requirements.txt) go into target/tck-venv once."""

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from conftest import BIN, ROOT, free_port, wait_healthy

TCK = Path(os.environ.get("A2A_TCK_DIR", ROOT.parent / "shared" / "conformance" / "a2a-tck"))
REQUIREMENTS = Path(__file__).with_name("tck-requirements.txt")
VENV = ROOT / "target" / "tck-venv"
# Compiled components, kept between runs so the gateway starts in seconds.
COMPONENT_CACHE = ROOT / "target" / "tck-component-cache"

if not (TCK / "run_tck.py").exists():
    pytest.skip(
        f"A2A TCK not found at {TCK} (expected ../shared/conformance/a2a-tck, or set A2A_TCK_DIR); "
        "skipping the A2A conformance run",
        allow_module_level=True,
    )


def tck_python() -> Path:
    """The TCK venv's interpreter, (re)installing the pins when they changed."""
    python = VENV / "bin" / "python"
    stamp = VENV / "requirements.sha256"
    wanted = hashlib.sha256(REQUIREMENTS.read_bytes()).hexdigest()
    if python.exists() and stamp.exists() and stamp.read_text() == wanted:
        return python
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(VENV)], check=True)
    subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "-r", str(REQUIREMENTS)],
        check=True,
    )
    stamp.write_text(wanted)
    return python


@pytest.fixture(scope="module")
def conformance_gateway():
    """A gateway with `[control_plane] conformance_mode = true` and a fresh data dir."""
    with tempfile.TemporaryDirectory() as tmp:
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        config = Path(tmp) / "tollgate.toml"
        config.write_text(
            f'listen = "127.0.0.1:{port}"\ndata_dir = "{tmp}/data"\ncache_dir = "{COMPONENT_CACHE}"\n'
            "[control_plane]\nconformance_mode = true\n"
        )
        gateway = subprocess.Popen([BIN, "serve", "--config", str(config)], env={**os.environ, "RUST_LOG": "warn"})
        try:
            wait_healthy(url, gateway)
            yield url
        finally:
            gateway.terminate()
            try:
                gateway.wait(timeout=10)
            except subprocess.TimeoutExpired:
                gateway.kill()


def test_tck_must_level_jsonrpc_has_no_failures(conformance_gateway, tmp_path):
    python = tck_python()
    # The runner must start from its own root and writes reports/ there.
    root = tmp_path / "a2a-tck"
    shutil.copytree(TCK, root)
    run = subprocess.run(
        [
            str(python),
            "run_tck.py",
            "--sut-host",
            conformance_gateway,
            "--transport",
            "jsonrpc",
            "--level",
            "must",
        ],
        cwd=root,
        env={**os.environ, "TCK_STREAMING_TIMEOUT": "2.0"},
        capture_output=True,
        text=True,
        timeout=600,
    )
    output = run.stdout + run.stderr
    summary = [line for line in output.splitlines() if " passed" in line or " failed" in line]
    print(f"A2A TCK (MUST, JSON-RPC): {summary[-1] if summary else '(no summary line)'}")

    report = root / "reports" / "junitreport.xml"
    assert report.exists(), f"the TCK wrote no report (exit {run.returncode}):\n{output[-4000:]}"
    suite = ET.parse(report).getroot().find("testsuite")
    counts = {k: int(suite.get(k, 0)) for k in ("tests", "failures", "errors", "skipped")}
    failed = counts["failures"] + counts["errors"]
    passed = counts["tests"] - failed - counts["skipped"]
    assert failed == 0, f"{failed} TCK tests failed ({counts}):\n{output[-8000:]}"
    # A run where every test skipped (e.g. the card could not be read) proves nothing.
    assert passed >= 50, f"only {passed} TCK tests passed ({counts}):\n{output[-4000:]}"
    assert run.returncode == 0, output[-4000:]
