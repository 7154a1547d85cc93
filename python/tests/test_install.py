"""`pip install ./python` into a fresh virtual environment, from the package registries only,
and the package works there. The build reuses the workspace's compiled crates when
CARGO_TARGET_DIR points at them and MATURIN_PEP517_ARGS asks for the dev profile, as .ci/run
does; run by .ci/run (COMMDB_TEST_INSTALL=1), skipped elsewhere because it downloads pyarrow."""

import os
import subprocess
import sys

import pytest

from conftest import REPO


@pytest.mark.skipif(os.environ.get("COMMDB_TEST_INSTALL") != "1", reason="set COMMDB_TEST_INSTALL=1 to install into a fresh venv (downloads pyarrow)")
def test_pip_install_into_a_fresh_venv(tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    install = subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", str(REPO / "python")],
        capture_output=True,
        text=True,
        timeout=3600,
    )
    assert install.returncode == 0, install.stdout + install.stderr
    check = (
        "import commdb, pyarrow as pa\n"
        "with commdb.open('generate:ranks=16,iterations=10') as t:\n"
        "    print(pa.table(t.sql('SELECT count(*) AS n FROM messages')).column(0)[0].as_py())\n"
    )
    out = subprocess.run([str(python), "-c", check], capture_output=True, text=True, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "480"
