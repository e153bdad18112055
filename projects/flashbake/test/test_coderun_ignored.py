"""Written for the coderun benchmark (not part of flashbake): the project's tests never load the `ignored`
plugin. These follow its docstrings: addignored lists, comma-separated, the files git ignores in a folder
(present but ignored, not untracked or modified ones), and addcontext writes that list into the message.
An ignored folder may be named as git's status names it (`build/`) or by the files in it."""

import io
import os
import shutil
import subprocess
import tempfile
import unittest

from flashbake import ControlConfig
from flashbake.plugins.ignored import Ignored


def git(repo, *args):
    subprocess.run(["git", "-c", "user.name=coderun", "-c", "user.email=coderun@example.invalid",
                    "-c", "init.defaultBranch=main", "-C", repo, *args],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def write(repo, name, text="x\n"):
    path = os.path.join(repo, name)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def names(listing):
    """The file names of addignored's comma-separated string, whatever spacing it puts around them."""
    return [name.strip() for name in listing.split(",") if name.strip()]


class AddIgnoredTestCase(unittest.TestCase):
    def setUp(self):
        self.repo = tempfile.mkdtemp(prefix="flashbake-ignored-")
        self.addCleanup(shutil.rmtree, self.repo)
        git(self.repo, "init", "-q")
        write(self.repo, ".gitignore", "*.log\nbuild/\nsecret.txt\n")
        write(self.repo, "tracked.txt")
        git(self.repo, "add", ".gitignore", "tracked.txt")
        git(self.repo, "commit", "-q", "-m", "start")
        self.plugin = Ignored("flashbake.plugins.ignored:Ignored")

    def test_lists_only_the_ignored_files(self):
        write(self.repo, "debug.log")
        write(self.repo, "secret.txt")
        write(self.repo, "build/out.bin")
        write(self.repo, "untracked.txt")  # untracked, not ignored
        write(self.repo, "tracked.txt", "changed\n")  # modified, not ignored
        listing = self.plugin.addignored(self.repo)
        self.assertIsInstance(listing, str)
        self.assertIn(sorted(names(listing)), (["build/", "debug.log", "secret.txt"],
                                                 ["build/out.bin", "debug.log", "secret.txt"]))
        self.assertEqual(listing.count(","), 2)
        self.assertNotIn("!", listing)

    def test_a_single_ignored_file_has_no_separator(self):
        write(self.repo, "run.log")
        listing = self.plugin.addignored(self.repo)
        self.assertEqual(names(listing), ["run.log"])
        self.assertNotIn(",", listing)

    def test_nothing_ignored_gives_an_empty_string(self):
        write(self.repo, "untracked.txt")
        self.assertEqual(self.plugin.addignored(self.repo).strip(), "")

    def test_addcontext_writes_the_list_into_the_message(self):
        write(self.repo, "a.log")
        write(self.repo, "b.log")
        self.plugin.ignored = self.repo
        message = io.StringIO()
        self.plugin.addcontext(message, ControlConfig())
        self.assertEqual(sorted(names(message.getvalue())), ["a.log", "b.log"])


if __name__ == "__main__":
    unittest.main()
