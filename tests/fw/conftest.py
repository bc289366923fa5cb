"""Under CPython, firmware tests run in a fresh temporary folder, as they do in MicroPython's."""

import pytest


@pytest.fixture(autouse=True)
def _in_tmp_dir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
