"""The server is local by default and sends nothing home."""

import subprocess
import sys
import tomllib
from pathlib import Path

CONFIG = Path(__file__).resolve().parents[2] / ".streamlit" / "config.toml"


def test_server_binds_to_localhost_and_sends_no_statistics():
    config = tomllib.loads(CONFIG.read_text(encoding="utf-8"))
    assert config["server"]["address"] == "localhost"
    assert config["server"]["port"] == 8501
    assert config["browser"]["gatherUsageStats"] is False
    assert config["client"]["showErrorDetails"] == "none"


def test_no_forced_collection_after_each_script_run():
    """Streamlit's gc.collect(2) after every (fragment) run starved the decoding thread on the built-in pair
    (docs/DESIGN.md, "Live runs"); the browser test on that pair is the end-to-end check."""
    config = tomllib.loads(CONFIG.read_text(encoding="utf-8"))
    assert config["runner"]["postScriptGC"] is False
    done = subprocess.run(  # and streamlit, started where the app is, reads it so
        [sys.executable, "-c", "import streamlit.config as c; print(c.get_option('runner.postScriptGC'))"],
        cwd=CONFIG.parent.parent,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.stdout.strip() == "False", done.stdout + done.stderr
