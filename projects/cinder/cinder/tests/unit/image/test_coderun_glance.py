"""coderun's tests of cinder.image.glance._parse_image_ref.

The project's own tests reach it only through get_remote_image_service with http URLs and check the image id
and the netloc, never use_ssl. Written for the benchmark from the function's docstring (an image href is
parsed into a tuple (image_id, netloc, use_ssl)) and its caller, which builds a glance client for that
netloc, over SSL when use_ssl is true.
"""

import unittest

from cinder.image import glance


class TestParseImageRef(unittest.TestCase):

    def test_http_url(self):
        self.assertEqual(('abc-123', 'glance.example.org', False),
                         glance._parse_image_ref('http://glance.example.org/abc-123'))

    def test_https_url_uses_ssl(self):
        self.assertEqual(('abc-123', 'glance.example.org:9292', True),
                         glance._parse_image_ref('https://glance.example.org:9292/abc-123'))

    def test_image_id_is_the_last_path_segment(self):
        self.assertEqual(('f00d', 'h:9292', False),
                         glance._parse_image_ref('http://h:9292/v2/images/f00d'))

    def test_ipv6_netloc_is_kept_as_written(self):
        self.assertEqual(('img', '[::1]:444', True), glance._parse_image_ref('https://[::1]:444/img'))

    def test_other_schemes_do_not_use_ssl(self):
        self.assertFalse(glance._parse_image_ref('ftp://h/img')[2])
        self.assertFalse(glance._parse_image_ref('HTTP://h/img')[2])

    def test_result_is_a_tuple(self):
        self.assertIsInstance(glance._parse_image_ref('http://h/img'), tuple)
