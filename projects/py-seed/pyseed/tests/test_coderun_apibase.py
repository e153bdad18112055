"""Written for the coderun benchmark (not part of py-seed): nothing in the project calls
pyseed.apibase._replace_url_args (seedclient.py has a copy of its own), so no project test reaches it.
These follow its docstring and the way seedclient's URL templates use such placeholders
('/api/v3/progress/PROGRESS_KEY/', filled from a request's `url_args`). The values are strings: the
docstring speaks of "custom string URL items", and how other values are written it leaves open."""

import unittest

from pyseed.apibase import _replace_url_args

PROGRESS = "/api/v3/progress/PROGRESS_KEY/"


class ReplaceUrlArgsTests(unittest.TestCase):
    def test_placeholder_is_replaced_by_its_value(self):
        self.assertEqual(_replace_url_args(PROGRESS, {"PROGRESS_KEY": "abc123"}), "/api/v3/progress/abc123/")

    def test_every_placeholder_given_is_replaced(self):
        url = "/api/v3/organizations/ORG_ID/cycles/CYCLE_ID/"
        args = {"ORG_ID": "7", "CYCLE_ID": "2022"}
        self.assertEqual(_replace_url_args(url, args), "/api/v3/organizations/7/cycles/2022/")

    def test_no_arguments_leave_the_url_unchanged(self):
        self.assertEqual(_replace_url_args(PROGRESS, {}), PROGRESS)

    def test_arguments_not_in_the_url_change_nothing(self):
        self.assertEqual(_replace_url_args(PROGRESS, {"PK": "3"}), PROGRESS)

    def test_full_urls_keep_their_scheme_and_host(self):
        url = "https://seed.example.org/api/v3/progress/PROGRESS_KEY/"
        self.assertEqual(_replace_url_args(url, {"PROGRESS_KEY": "k1"}),
                         "https://seed.example.org/api/v3/progress/k1/")


if __name__ == "__main__":
    unittest.main()
