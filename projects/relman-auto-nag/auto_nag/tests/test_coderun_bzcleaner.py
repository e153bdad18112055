# coderun's tests of BzCleaner.amend_bzparams ("Amend the Bugzilla params"), which the project's own tests
# reach only through Bugzilla queries (network). Written for the benchmark from how the tools use it:
# get_bugs() builds a tool's query with get_bz_params() and hands it to amend_bzparams() with the bug ids,
# and each tool says what its query needs through the hooks their names describe (has_assignee,
# has_needinfo, filter_no_nag_keyword: "remove the bugs with [no-nag] in whiteboard", ignore_meta, ...), in
# Bugzilla's query language (include_fields; bug_id; fN/oN/vN conditions). What the docstring leaves open
# is not checked: the order of the fields, which numbers the new conditions take (only that they keep the
# query's own), the attributes the method may set on the tool.
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


def conditions(params):
    """The (field, operator, value) conditions of a query, whatever their numbers."""
    nums = {k[1:] for k in params if k[:1] == "f" and k[1:].isdigit()}
    return {(params[f"f{n}"], params.get(f"o{n}"), params.get(f"v{n}")) for n in nums}


def fields(params):
    value = params["include_fields"]
    return [value] if isinstance(value, str) else list(value)


class TestIncludeFields(unittest.TestCase):
    def test_id_summary_and_groups_by_default(self):
        params = amended(Tool(), {})
        self.assertEqual(set(params), {"include_fields"})
        self.assertEqual(sorted(fields(params)), ["groups", "id", "summary"])

    def test_a_list_gets_the_id_once(self):
        for given in (["type", "creator"], ["id", "type"]):
            with self.subTest(given=given):
                got = fields(amended(Tool(), {"include_fields": list(given)}))
                self.assertEqual(set(got), set(given) | {"id", "summary", "groups"})
                self.assertEqual(got.count("id"), 1)

    def test_a_single_field(self):
        got = fields(amended(Tool(), {"include_fields": "type"}))
        self.assertEqual(set(got), {"type", "id", "summary", "groups"})

    def test_fields_the_hooks_ask_for(self):
        tool = Tool(has_assignee=True, has_product_component=True, has_needinfo=True)
        got = fields(amended(tool, {"include_fields": ["id"]}))
        self.assertEqual(set(got), {"id", "summary", "groups", "assigned_to", "product", "component", "flags"})

    def test_requested_fields_are_not_repeated(self):
        tool = Tool(has_assignee=True, has_product_component=True, has_needinfo=True)
        requested = ["assigned_to", "product", "component", "flags"]
        got = fields(amended(tool, {"include_fields": list(requested)}))
        self.assertEqual(sorted(got), sorted(requested + ["id", "summary", "groups"]))

    def test_all_fields_leaves_them_alone(self):
        tool = Tool(all_include_fields=True, has_assignee=True, has_needinfo=True)
        self.assertEqual(amended(tool, {"resolution": "---"}), {"resolution": "---"})
        self.assertEqual(fields(amended(Tool(all_include_fields=True), {"include_fields": ["flags"]})), ["flags"])


class TestQuery(unittest.TestCase):
    def test_bug_ids(self):
        self.assertEqual(amended(Tool(), {}, [123, 456])["bug_id"], [123, 456])
        self.assertNotIn("bug_id", amended(Tool(), {}, []))

    def test_no_nag_bugs_are_left_out_and_the_querys_conditions_kept(self):
        params = {"f1": "flagtypes.name", "o1": "substring", "v1": "needinfo?"}
        amended(Tool(filter_no_nag_keyword=True), params)
        self.assertEqual(conditions(params), {("flagtypes.name", "substring", "needinfo?"),
                                              ("status_whiteboard", "notsubstring", "[no-nag]")})

    def test_every_condition_in_turn(self):
        tool = Tool(filter_no_nag_keyword=True, ignore_meta=True, get_max_years=3, has_default_products=True,
                    get_products=["Core", "Firefox"], has_access_to_sec_bugs=False)
        params = amended(tool, {"resolution": "---", "j3": "OR", "f3": "OP"}, [7])
        self.assertEqual((params["resolution"], params["j3"], params["f3"]), ("---", "OR", "OP"))
        self.assertEqual(params["bug_id"], [7])
        self.assertEqual(params["product"], ["Core", "Firefox"])
        self.assertEqual(conditions(params), {("OP", None, None),
                                              ("status_whiteboard", "notsubstring", "[no-nag]"),
                                              ("keywords", "nowords", "meta"),
                                              ("creation_ts", "greaterthan", "-3y"),
                                              ("bug_group", "isempty", None)})

    def test_unlimited_years_and_products_left_alone(self):
        params = amended(Tool(get_max_years=-1, has_default_products=False), {"product": "Fenix"})
        self.assertEqual(params["product"], "Fenix")
        self.assertEqual(conditions(params), set())


if __name__ == "__main__":
    unittest.main()
