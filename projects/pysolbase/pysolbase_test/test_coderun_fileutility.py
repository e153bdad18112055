"""FileUtility's checks and text reads, written for coderun's benchmark from the docstrings (CoderEval's tasks
is_file_exist, file_to_textbuffer, append_text_to_file): the project's own tests never give these a missing
file, a directory, a non-str name or another encoding. What the docstrings leave open is not tested (the
count append_text_to_file returns on success: "the number of bytes written", but codecs' writer returns None
on Python 3, as the function's own comment says)."""

import os
import tempfile
import unittest

from pysolbase.FileUtility import FileUtility


class TestIsFileExist(unittest.TestCase):
    """Return true (exist), false (do not exist, or invalid file name)."""

    def test_an_existing_file_is_true(self):
        with tempfile.NamedTemporaryFile() as f:
            self.assertIs(FileUtility.is_file_exist(f.name), True)

    def test_a_missing_file_or_a_folder_is_false(self):
        with tempfile.TemporaryDirectory() as folder:
            self.assertIs(FileUtility.is_file_exist(os.path.join(folder, "missing.txt")), False)
            self.assertIs(FileUtility.is_file_exist(folder), False)

    def test_an_invalid_file_name_is_false(self):
        self.assertIs(FileUtility.is_file_exist(None), False)
        self.assertIs(FileUtility.is_file_exist(42), False)
        self.assertIs(FileUtility.is_file_exist(b"/etc/hostname"), False)


class TestFileToTextbuffer(unittest.TestCase):
    """A text buffer, read with the given encoding, or None in case of error."""

    def test_the_text_is_read_with_the_given_encoding(self):
        with tempfile.TemporaryDirectory() as folder:
            path = os.path.join(folder, "latin.txt")
            with open(path, "wb") as f:
                f.write("caf\u00e9 cr\u00e8me".encode("latin-1"))
            self.assertEqual(FileUtility.file_to_textbuffer(path, "latin-1"), "caf\u00e9 cr\u00e8me")

    def test_a_missing_file_is_none(self):
        with tempfile.TemporaryDirectory() as folder:
            self.assertIsNone(FileUtility.file_to_textbuffer(os.path.join(folder, "missing.txt"), "utf-8"))

    def test_bytes_the_encoding_cannot_read_are_none(self):
        with tempfile.TemporaryDirectory() as folder:
            path = os.path.join(folder, "latin.txt")
            with open(path, "wb") as f:
                f.write(b"caf\xe9 au lait")
            self.assertIsNone(FileUtility.file_to_textbuffer(path, "utf-8"))


class TestAppendTextToFile(unittest.TestCase):
    """Write the text buffer with the given encoding, create the file if required, overwrite it when asked;
    lt 0 if error."""

    def test_text_is_appended_then_overwritten_in_the_encoding(self):
        with tempfile.TemporaryDirectory() as folder:
            path = os.path.join(folder, "out.txt")
            FileUtility.append_text_to_file(path, "caf\u00e9", "latin-1")
            FileUtility.append_text_to_file(path, " cr\u00e8me", "latin-1")
            with open(path, "rb") as f:
                self.assertEqual(f.read(), "caf\u00e9 cr\u00e8me".encode("latin-1"))
            FileUtility.append_text_to_file(path, "neuf", "latin-1", overwrite=True)
            with open(path, "rb") as f:
                self.assertEqual(f.read(), b"neuf")

    def test_an_error_is_below_zero(self):
        with tempfile.TemporaryDirectory() as folder:
            self.assertLess(FileUtility.append_text_to_file(folder, "text", "utf-8"), 0)
            missing = os.path.join(folder, "no", "such", "folder", "out.txt")
            self.assertLess(FileUtility.append_text_to_file(missing, "text", "utf-8"), 0)
