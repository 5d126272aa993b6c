"""The test session's compilation cache (``conftest.py``): a killed session's cache is removed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import conftest

pytestmark = pytest.mark.skipif(conftest.fcntl is None, reason="no flock on this platform")

ROOT = Path(conftest.__file__).parent


def test_a_cache_is_removed_once_its_owner_lock_is_released(tmp_path):
    running, running_lock = conftest.make_owned_cache(str(tmp_path))
    ended, ended_lock = conftest.make_owned_cache(str(tmp_path))
    os.close(ended_lock)  # as the operating system does for a killed process
    unlocked = tmp_path / (conftest.CACHE_PREFIX + "in-the-making")
    unlocked.mkdir()  # no owner lock yet: left alone
    other = tmp_path / "someone-elses-folder"
    other.mkdir()
    (Path(ended) / "entry").write_bytes(b"compiled")
    try:
        assert conftest.remove_orphaned_caches(str(tmp_path)) == [ended]
        assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
            [Path(running).name, unlocked.name, other.name]
        )
        assert conftest.remove_orphaned_caches(str(tmp_path)) == []  # the running one stays
    finally:
        os.close(running_lock)


def test_without_flock_a_cache_has_no_owner_lock_and_is_left_alone(tmp_path, monkeypatch):
    def refuse(fd, operation):
        raise OSError(37, "No locks available")

    monkeypatch.setattr(conftest.fcntl, "flock", refuse)
    cache, lock = conftest.make_owned_cache(str(tmp_path))
    assert lock is None
    assert os.listdir(cache) == []
    assert conftest.remove_orphaned_caches(str(tmp_path)) == []
    assert Path(cache).is_dir()


def test_the_cache_of_a_killed_process_is_removed(tmp_path):
    """A process that made a cache and was killed with SIGKILL leaves it; the next removes it."""
    script = (
        "import sys; import conftest; "
        "cache, _ = conftest.make_owned_cache(sys.argv[1]); print(cache, flush=True); "
        "sys.stdin.read()"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    owner = subprocess.Popen(
        [sys.executable, "-c", script, str(tmp_path)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env, cwd=ROOT,
    )  # fmt: skip
    try:
        cache = owner.stdout.readline().strip()
        assert Path(cache).parent == tmp_path and Path(cache).is_dir(), cache
        assert conftest.remove_orphaned_caches(str(tmp_path)) == []  # its owner is alive
        owner.send_signal(signal.SIGKILL)
        owner.wait(timeout=60)
        assert conftest.remove_orphaned_caches(str(tmp_path)) == [cache]
        assert not Path(cache).exists()
    finally:
        owner.kill()
        owner.communicate()
