"""HookDispatcher.on, written for coderun's benchmark (tests.supplementary).

Krake's own tests never call `on` while a test runs: its body runs only when hooks.py is imported (the
module-level `@listen.on(...)` decorators), so per-test coverage maps no test to it. These tests call it
directly, from its docstring and the way hooks.py and the Kubernetes controller use the registry.
"""
import asyncio

from krake.controller.kubernetes.hooks import (
    HookDispatcher,
    HookType,
    listen,
    register_observer,
    register_service,
    unregister_observer,
    update_last_applied_manifest_from_resp,
)


def test_on_returns_a_decorator_that_keeps_the_handler():
    dispatcher = HookDispatcher()

    def handler(**kwargs):
        return "called"

    decorator = dispatcher.on(HookType.ResourcePostCreate)
    assert callable(decorator)
    decorated = decorator(handler)
    # The handler itself comes back, so it stays usable under its own name.
    assert decorated is handler
    assert decorated() == "called"
    assert dispatcher.registry[HookType.ResourcePostCreate] == [handler]


def test_on_appends_handlers_in_order_per_hook():
    dispatcher = HookDispatcher()

    @dispatcher.on(HookType.ApplicationMangling)
    def first(**kwargs):
        pass

    @dispatcher.on(HookType.ApplicationMangling)
    def second(**kwargs):
        pass

    @dispatcher.on(HookType.ClusterDeletion)
    def other(**kwargs):
        pass

    assert dispatcher.registry[HookType.ApplicationMangling] == [first, second]
    assert dispatcher.registry[HookType.ClusterDeletion] == [other]
    assert dispatcher.registry[HookType.ResourcePreDelete] == []


def test_on_stacked_registers_one_handler_under_several_hooks():
    dispatcher = HookDispatcher()

    @dispatcher.on(HookType.ResourcePostCreate)
    @dispatcher.on(HookType.ResourcePostUpdate)
    def handler(**kwargs):
        pass

    assert handler.__name__ == "handler"
    assert dispatcher.registry[HookType.ResourcePostCreate] == [handler]
    assert dispatcher.registry[HookType.ResourcePostUpdate] == [handler]


def test_on_registries_are_per_dispatcher():
    one, two = HookDispatcher(), HookDispatcher()

    @one.on(HookType.ClusterCreation)
    def handler(**kwargs):
        pass

    assert one.registry[HookType.ClusterCreation] == [handler]
    assert two.registry[HookType.ClusterCreation] == []


def test_on_registered_handlers_are_run_by_hook():
    dispatcher = HookDispatcher()
    calls = []

    @dispatcher.on(HookType.ResourcePreDelete)
    def sync_handler(resource, **kwargs):
        calls.append(("sync", resource))

    @dispatcher.on(HookType.ResourcePreDelete)
    async def async_handler(resource, **kwargs):
        calls.append(("async", resource))

    asyncio.run(dispatcher.hook(HookType.ResourcePreDelete, resource="r1", app=None))
    assert calls == [("sync", "r1"), ("async", "r1")]


def test_module_listeners_are_registered():
    # hooks.py registers its listeners on the module's dispatcher with `@listen.on(...)`.
    post_create = listen.registry[HookType.ResourcePostCreate]
    assert register_service in post_create
    assert update_last_applied_manifest_from_resp in post_create
    assert register_service in listen.registry[HookType.ResourcePostUpdate]
    assert register_observer in listen.registry[HookType.ClusterCreation]
    assert unregister_observer in listen.registry[HookType.ClusterDeletion]
    assert listen.registry[HookType.ResourcePreCreate] == []
