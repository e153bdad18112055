"""build_app_logger, written for coderun's benchmark (tests.supplementary).

No test of apphelpers calls it: it runs only when apphelpers.loggers is imported (`app_logger = ...`).
These tests follow its docstring and body's documented contract: a logger by name that writes to
logs/<logfile> (created when missing) through a rotating file handler, DEBUG or INFO after settings.DEBUG.
"""
import logging
import os
from logging.handlers import RotatingFileHandler

import pytest
from converge import settings

from apphelpers.loggers import build_app_logger


@pytest.fixture
def in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    made = []
    yield made
    for logger in made:  # leave no open files or handlers to the next test
        for handler in list(logger.handlers):
            logger.removeHandler(handler)
            handler.close()


def _file_handlers(logger):
    return [h for h in logger.handlers if isinstance(h, RotatingFileHandler)]


def test_logs_to_a_file_under_logs(in_tmp, tmp_path, monkeypatch):
    monkeypatch.setattr(settings, "DEBUG", True, raising=False)
    logger = build_app_logger(name="coderun-a", logfile="a.log")
    in_tmp.append(logger)
    assert isinstance(logger, logging.Logger)
    assert logger is logging.getLogger("coderun-a")
    assert (tmp_path / "logs").is_dir()
    [handler] = _file_handlers(logger)
    assert os.path.abspath(handler.baseFilename) == str(tmp_path / "logs" / "a.log")
    logger.info("hello %s", "world")
    logger.debug("details")
    handler.flush()
    text = (tmp_path / "logs" / "a.log").read_text()
    lines = text.splitlines()
    assert lines[0].startswith("[INFO] ") and lines[0].endswith(": hello world")
    assert lines[1].startswith("[DEBUG] ") and lines[1].endswith(": details")


def test_debug_setting_chooses_the_level(in_tmp, tmp_path, monkeypatch):
    monkeypatch.setattr(settings, "DEBUG", True, raising=False)
    debug = build_app_logger(name="coderun-debug", logfile="d.log")
    in_tmp.append(debug)
    assert debug.level == logging.DEBUG
    assert _file_handlers(debug)[0].level == logging.DEBUG

    monkeypatch.setattr(settings, "DEBUG", False, raising=False)
    quiet = build_app_logger(name="coderun-quiet", logfile="q.log")
    in_tmp.append(quiet)
    assert quiet.level == logging.INFO
    [handler] = _file_handlers(quiet)
    assert handler.level == logging.INFO
    quiet.debug("not written")
    quiet.warning("written")
    handler.flush()
    text = (tmp_path / "logs" / "q.log").read_text()
    assert "not written" not in text
    assert text.startswith("[WARNING] ") and "written" in text


def test_rotation_limits(in_tmp, monkeypatch):
    monkeypatch.setattr(settings, "DEBUG", False, raising=False)
    logger = build_app_logger(name="coderun-rot", logfile="r.log")
    in_tmp.append(logger)
    [handler] = _file_handlers(logger)
    assert handler.maxBytes == 10 * 1024 * 1024
    assert handler.backupCount == 100


def test_defaults_and_an_existing_logs_folder(in_tmp, tmp_path, monkeypatch):
    monkeypatch.setattr(settings, "DEBUG", True, raising=False)
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "keep.txt").write_text("x")
    logger = build_app_logger()
    in_tmp.append(logger)
    assert logger.name == "app"
    assert (tmp_path / "logs" / "keep.txt").read_text() == "x"
    assert any(os.path.abspath(h.baseFilename) == str(tmp_path / "logs" / "app.log")
               for h in _file_handlers(logger))
