"""Tests written for coderun's benchmark (not part of packtools): the package-folder exploration that
tests/sps/test_packages.py's TestFolder checks with two .tif fixtures the snapshot could not ship. The same
folder is made in a temporary directory, the images as empty files (only their names are read)."""

import os
import shutil

from packtools import file_utils
from packtools.sps.models import packages

FIXTURE = os.path.join(os.path.dirname(__file__), "fixtures", "package_folder")
IMAGES = ("2318-0889-tinf-33-e200068-gf01.tif", "2318-0889-tinf-33-e200068-gf02.tif")


def _folder(tmp_path):
    folder = str(tmp_path / "package_folder")
    shutil.copytree(FIXTURE, folder)
    for name in IMAGES:
        open(os.path.join(folder, name), "wb").close()
    return folder


def test_files_list_names_every_file_of_the_folder(tmp_path):
    folder = _folder(tmp_path)
    assert sorted(file_utils.files_list(folder)) == sorted(os.listdir(folder))
    assert set(IMAGES) <= set(file_utils.files_list(folder))
    assert file_utils.files_list(str(tmp_path)) == ["package_folder"]


def test_explore_folder_groups_files_by_xml(tmp_path):
    folder = _folder(tmp_path)
    result = packages._explore_folder(folder)
    assert sorted(result) == ["2318-0889-tinf-33-e200057", "2318-0889-tinf-33-e200068"]
    first, second = result["2318-0889-tinf-33-e200057"], result["2318-0889-tinf-33-e200068"]
    assert first.xml == os.path.join(folder, "2318-0889-tinf-33-e200057.xml")
    assert first.assets == {}
    assert first.renditions == {"original": os.path.join(folder, "2318-0889-tinf-33-e200057.pdf")}
    assert second.xml == os.path.join(folder, "2318-0889-tinf-33-e200068.xml")
    assert second.renditions == {"original": os.path.join(folder, "2318-0889-tinf-33-e200068.pdf"),
                                 "es": os.path.join(folder, "2318-0889-tinf-33-e200068-es.pdf")}
    assert second.assets == {name: os.path.join(folder, name) for name in IMAGES}


def test_explore_folder_of_something_else(tmp_path):
    assert packages._explore_folder(str(tmp_path / "missing")) is None
    zip_path = str(tmp_path / "package.zip")
    open(zip_path, "wb").close()
    assert packages._explore_folder(zip_path) is None
    assert packages._explore_folder(str(tmp_path)) == {}
