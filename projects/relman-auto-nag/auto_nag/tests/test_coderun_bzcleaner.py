# coderun's tests of BzCleaner.amend_bzparams, which the project's own tests reach only through Bugzilla
# queries (network). Written for the benchmark from how the tools use it: get_bugs() builds a tool's query
# with get_bz_params() and hands it to amend_bzparams() with the bug ids, and each tool steers the amendments
# through its hooks (has_assignee, has_needinfo, ignore_meta, get_max_years, ...).
import unittest

from auto_nag.bzcleaner import BzCleaner


DEFAULT_HOOKS = {
    "all_include_fields": False,
    "has_assignee": False,
    "has_product_component": False,
    "has_needinfo": False,
    "filter_no_nag_keyword": False,
    "ignore_meta": False,
    "get_max_years": -1,
    "has_default_products": False,
    "get_products": [],
    "has_access_to_sec_bugs": True,
}


class Tool(BzCleaner):
    """A tool whose hooks answer from keyword arguments instead of the tools' configuration file."""

    def __init__(self, **hooks):
        super().__init__()
        self.hooks = dict(DEFAULT_HOOKS, **hooks)


def _hook(name):
    return lambda self: self.hooks[name]


for _name in DEFAULT_HOOKS:
    setattr(Tool, _name, _hook(_name))


def amended(tool, params, bug_ids=()):
    tool.amend_bzparams(params, list(bug_ids))
    return params


class TestIncludeFields(unittest.TestCase):
    def test_id_summary_and_groups_by_default(self):
        tool = Tool()
        self.assertEqual(amended(tool, {}), {"include_fields": ["id", "summary", "groups"]})
        self.assertFalse(tool.has_flags)

    def test_list_gets_the_id_once(self):
        params = amended(Tool(), {"include_fields": ["type", "creator"]})
        self.assertEqual(params["include_fields"], ["type", "creator", "id", "summary", "groups"])
        params = amended(Tool(), {"include_fields": ["id", "type"]})
        self.assertEqual(params["include_fields"], ["id", "type", "summary", "groups"])

    def test_single_field_becomes_a_list(self):
        params = amended(Tool(), {"include_fields": "type"})
        self.assertEqual(params["include_fields"], ["type", "id", "summary", "groups"])

    def test_fields_the_hooks_ask_for(self):
        tool = Tool(has_assignee=True, has_product_component=True, has_needinfo=True)
        params = amended(tool, {"include_fields": ["id"]})
        self.assertEqual(
            params["include_fields"],
            ["id", "summary", "groups", "assigned_to", "product", "component", "flags"],
        )
        self.assertTrue(tool.has_flags)

    def test_requested_fields_are_not_repeated(self):
        tool = Tool(has_assignee=True, has_product_component=True, has_needinfo=True)
        fields = ["assigned_to", "product", "component", "flags"]
        params = amended(tool, {"include_fields": list(fields)})
        self.assertEqual(params["include_fields"], fields + ["id", "summary", "groups"])
        self.assertTrue(tool.has_flags)

    def test_all_fields_leaves_them_alone(self):
        tool = Tool(all_include_fields=True, has_assignee=True, has_needinfo=True)
        self.assertEqual(amended(tool, {"resolution": "---"}), {"resolution": "---"})
        self.assertFalse(tool.has_flags)
        tool = Tool(all_include_fields=True)
        params = amended(tool, {"include_fields": ["flags"]})
        self.assertEqual(params["include_fields"], ["flags"])
        self.assertTrue(tool.has_flags)


class TestQuery(unittest.TestCase):
    def test_bug_ids(self):
        params = amended(Tool(), {}, [123, 456])
        self.assertEqual(params["bug_id"], [123, 456])
        self.assertNotIn("bug_id", amended(Tool(), {}, []))

    def test_no_nag_after_the_last_field(self):
        params = {"f1": "flagtypes.name", "o1": "substring", "v1": "needinfo?"}
        amended(Tool(filter_no_nag_keyword=True), params)
        self.assertEqual(
            (params["f2"], params["o2"], params["v2"]), ("status_whiteboard", "notsubstring", "[no-nag]")
        )

    def test_every_condition_in_turn(self):
        tool = Tool(
            filter_no_nag_keyword=True,
            ignore_meta=True,
            get_max_years=3,
            has_default_products=True,
            get_products=["Core", "Firefox"],
            has_access_to_sec_bugs=False,
        )
        params = amended(tool, {"resolution": "---", "j3": "OR", "f3": "OP"}, [7])
        self.assertEqual(
            params,
            {
                "resolution": "---",
                "j3": "OR",
                "f3": "OP",
                "include_fields": ["id", "summary", "groups"],
                "bug_id": [7],
                "f4": "status_whiteboard",
                "o4": "notsubstring",
                "v4": "[no-nag]",
                "f5": "keywords",
                "o5": "nowords",
                "v5": "meta",
                "f6": "creation_ts",
                "o6": "greaterthan",
                "v6": "-3y",
                "product": ["Core", "Firefox"],
                "f7": "bug_group",
                "o7": "isempty",
            },
        )

    def test_first_condition_is_number_one(self):
        params = amended(Tool(ignore_meta=True), {})
        self.assertEqual((params["f1"], params["o1"], params["v1"]), ("keywords", "nowords", "meta"))

    def test_unlimited_years_and_products_left_alone(self):
        params = amended(Tool(get_max_years=-1, has_default_products=False), {"product": "Fenix"})
        self.assertEqual(params, {"product": "Fenix", "include_fields": ["id", "summary", "groups"]})


if __name__ == "__main__":
    unittest.main()
