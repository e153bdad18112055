"""Written for the coderun benchmark (not part of gopad-python): the project's generated tests are empty
stubs, so nothing reached gopad.rest's address helpers. These tests follow the helpers' docstrings and their
caller, RESTClientObject, which bypasses the proxy for hosts listed in `no_proxy`."""

import unittest

import urllib3
from gopad.configuration import Configuration
from gopad.rest import RESTClientObject, in_ipv4net, is_ipv4, should_bypass_proxies


class TestIsIpv4(unittest.TestCase):
    def test_dotted_quads_are_ipv4(self):
        for address in ("127.0.0.1", "10.1.2.3", "192.168.0.254", "0.0.0.0", "255.255.255.255"):
            with self.subTest(address=address):
                self.assertIs(is_ipv4(address), True)

    def test_other_strings_are_not(self):
        for text in ("example.com", "localhost", "", "1.2.3", "1.2.3.4.5", "256.1.1.1", "1.2.3.-4",
                     "10.0.0.0/8", "::1", "fe80::1", "a.b.c.d", " "):
            with self.subTest(text=text):
                self.assertIs(is_ipv4(text), False)


class TestInIpv4net(unittest.TestCase):
    def test_membership(self):
        self.assertTrue(in_ipv4net("10.1.2.3", "10.0.0.0/8"))
        self.assertFalse(in_ipv4net("11.1.2.3", "10.0.0.0/8"))
        self.assertTrue(in_ipv4net("192.168.1.7", "192.168.1.7"))


class TestShouldBypassProxies(unittest.TestCase):
    def test_address_inside_a_no_proxy_network_bypasses(self):
        self.assertTrue(should_bypass_proxies("http://10.1.2.3:8080/api", no_proxy="10.0.0.0/8"))
        self.assertTrue(should_bypass_proxies("http://192.168.0.9/", no_proxy="example.com, 192.168.0.0/16"))

    def test_address_outside_the_networks_does_not(self):
        self.assertFalse(should_bypass_proxies("http://172.16.0.1/", no_proxy="10.0.0.0/8,192.168.0.0/16"))

    def test_host_names_are_matched_by_name(self):
        self.assertTrue(should_bypass_proxies("http://api.example.com/", no_proxy="example.com"))
        self.assertFalse(should_bypass_proxies("http://api.example.org/", no_proxy="10.0.0.0/8"))


class TestClientProxy(unittest.TestCase):
    def client(self, host):
        config = Configuration(host=host)
        config.proxy = "http://proxy.invalid:3128"
        config.no_proxy = "10.0.0.0/8"
        return RESTClientObject(config)

    def test_host_in_no_proxy_network_gets_a_direct_pool(self):
        manager = self.client("http://10.20.30.40/api").pool_manager
        self.assertNotIsInstance(manager, urllib3.ProxyManager)

    def test_other_host_goes_through_the_proxy(self):
        manager = self.client("http://172.16.5.5/api").pool_manager
        self.assertIsInstance(manager, urllib3.ProxyManager)


if __name__ == "__main__":
    unittest.main()
