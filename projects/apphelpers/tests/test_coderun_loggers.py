"""build_app_logger, written for coderun's benchmark (tests.supplementary).

No test of apphelpers calls it: it runs only when apphelpers.loggers is imported (`app_logger = ...`).
These tests follow its docstrings ("General purpose application logger. Useful mainly for debugging"; the
logger of that name, writing to the log file named `logfile`). Where the file goes, its format, rotation,
and which setting turns debugging on the docstrings do not say: the file is looked for anywhere below the
working folder, and debug messages are checked with both the setting and the argument for debugging.
"""
import logging

import pytest
from converge import settings

from apphelpers.loggers import build_app_logger


@pytest.fixture
def in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(settings, "DEBUG", True, raising=False)
    made = []
    yield made
    for logger in made:  # leave no open files or handlers to the next test
        for handler in list(logger.handlers):
            logger.removeHandler(handler)
            handler.close()


def _written(tmp_path, logfile, logger):
    for handler in logger.handlers:
        handler.flush()
    found = [p for p in tmp_path.rglob(logfile) if p.is_file()]
    assert len(found) == 1, found
    return found[0].read_text()


def test_a_logger_of_that_name_writes_to_the_log_file(in_tmp, tmp_path):
    logger = build_app_logger(name="coderun-a", logfile="a.log")
    in_tmp.append(logger)
    assert isinstance(logger, logging.Logger)
    assert logger is logging.getLogger("coderun-a")
    logger.warning("hello %s", "world")
    assert "hello world" in _written(tmp_path, "a.log", logger)


def test_debug_messages_are_written_when_debugging(in_tmp, tmp_path):
    logger = build_app_logger(name="coderun-debug", logfile="d.log", debug=True)
    in_tmp.append(logger)
    logger.debug("details")
    logger.info("progress")
    text = _written(tmp_path, "d.log", logger)
    assert "details" in text and "progress" in text


def test_defaults(in_tmp, tmp_path):
    logger = build_app_logger()
    in_tmp.append(logger)
    assert logger.name == "app"
    logger.error("default file")
    assert "default file" in _written(tmp_path, "app.log", logger)
