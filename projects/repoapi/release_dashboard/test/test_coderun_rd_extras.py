# Written for the coderun benchmark (not part of repoapi): no project test renders the build index page,
# the one user of the rd_extras template filters. These follow replace_dots's docstring and that page, which
# turns release bases such as "mr10.1" into HTML ids ("mr10_1").
from django.contrib.auth.models import User
from django.template import Context, Template
from django.test import SimpleTestCase, TestCase
from django.urls import reverse
from release_dashboard.templatetags.rd_extras import replace_dots


class TestReplaceDots(SimpleTestCase):
    def test_every_dot_is_replaced(self):
        self.assertEqual(replace_dots("mr10.1.1", "_"), "mr10_1_1")
        self.assertEqual(replace_dots("a.b.c.d", "-"), "a-b-c-d")

    def test_replacement_may_be_longer_or_empty(self):
        self.assertEqual(replace_dots("mr7.5", "_dot_"), "mr7_dot_5")
        self.assertEqual(replace_dots("1.2.3", ""), "123")

    def test_without_dots_the_value_is_unchanged(self):
        self.assertEqual(replace_dots("master", "_"), "master")
        self.assertEqual(replace_dots("", "_"), "")

    def test_leading_trailing_and_repeated_dots(self):
        self.assertEqual(replace_dots(".mr..9.", "_"), "_mr__9_")

    def test_as_a_template_filter(self):
        tpl = Template("{% load rd_extras %}{{ base|replace_dots:'_' }}")
        self.assertEqual(tpl.render(Context({"base": "mr10.5"})), "mr10_5")


class TestBuildIndexIds(TestCase):
    def test_release_bases_become_html_ids(self):
        user = User.objects.create_user(username="coderun")
        self.client.force_login(user)
        res = self.client.get(reverse("release_dashboard:build_index"))
        self.assertEqual(res.status_code, 200)
        html = res.content.decode()
        # build/fixtures/config holds mr10.1 and mr7.5 releases, among others
        self.assertIn('id="mr10_1"', html)
        self.assertIn('href="#mr7_5"', html)
        self.assertNotIn('id="mr10.1"', html)
