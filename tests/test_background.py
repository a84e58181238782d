"""A test whose background thread raises fails, with the thread's traceback (issue 25)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from tests.support.background import Background, BackgroundError, files_now

pytest_plugins = ["pytester"]


def test_background_exception_fails_where_the_test_joins_it() -> None:
    def boom(stop: threading.Event) -> None:
        raise FileNotFoundError("tier/bwlogs vanished")

    with pytest.raises(BackgroundError, match="FileNotFoundError: tier/bwlogs vanished") as info:
        with Background(boom, name="watcher"):
            pass
    assert isinstance(info.value.__cause__, FileNotFoundError)


def test_background_that_ignores_stop_fails_the_test() -> None:
    release = threading.Event()
    with pytest.raises(BackgroundError, match="did not stop"):
        with Background(lambda stop: release.wait(30), join_timeout=0.2):
            pass
    release.set()


def test_a_bare_thread_that_raises_fails_its_test(pytester: pytest.Pytester) -> None:
    # the suite's own warning filters, applied to a test that starts a plain thread which raises
    root = Path(__file__).resolve().parent.parent
    pytester.makeini("[pytest]\nfilterwarnings =\n    error\n    error::pytest.PytestUnhandledThreadExceptionWarning\n")
    assert "error::pytest.PytestUnhandledThreadExceptionWarning" in (root / "pyproject.toml").read_text()
    pytester.makepyfile(test_thread="""
        import threading

        def test_watcher():
            t = threading.Thread(target=lambda: open("/nonexistent/kvgate/dir"))
            t.start()
            t.join()
    """)
    res = pytester.runpytest_inprocess("-p", "no:cacheprovider")
    res.assert_outcomes(failed=1)
    res.stdout.fnmatch_lines(["*FileNotFoundError*nonexistent/kvgate/dir*"])


def test_files_now_skips_a_directory_removed_mid_walk(tmp_path: Path) -> None:
    keep = tmp_path / "kv" / "a.kvchunk"
    keep.parent.mkdir()
    keep.write_bytes(b"x")
    gone = tmp_path / "bwlogs"
    gone.mkdir()
    (gone / "log.kvchunk").write_bytes(b"y")
    walker = files_now(tmp_path, ".kvchunk")
    first = next(walker)
    for p in gone.iterdir():
        p.unlink()
    gone.rmdir()  # vanishes between two steps of the walk, as fio's bwlogs did
    rest = list(walker)
    assert {first, *rest} <= {keep, gone / "log.kvchunk"} and keep in {first, *rest}
