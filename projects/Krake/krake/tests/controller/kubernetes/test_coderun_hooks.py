"""HookDispatcher.on, written for coderun's benchmark (tests.supplementary).

Krake's own tests never call `on` while a test runs: its body runs only when hooks.py is imported (the
module-level `@listen.on(...)` decorators), so per-test coverage maps no test to it. These tests call it
directly, from its docstring: `on(hook)` returns a decorator that adds the handler to the registry under that
hook. Whether the decorator gives back the handler itself or a wrapper the docstring does not say: only
that what it gives back still calls the handler is checked.
"""
import asyncio

from krake.controller.kubernetes.hooks import HookDispatcher, HookType, listen


def test_on_returns_a_decorator_that_keeps_the_handler():
    dispatcher = HookDispatcher()

    def handler(**kwargs):
        return "called"

    decorator = dispatcher.on(HookType.ResourcePostCreate)
    assert callable(decorator)
    decorated = decorator(handler)
    # What comes back stays usable under the handler's name.
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

    calls = []

    @dispatcher.on(HookType.ResourcePostCreate)
    @dispatcher.on(HookType.ResourcePostUpdate)
    def handler(**kwargs):
        calls.append(kwargs)

    for hook in (HookType.ResourcePostCreate, HookType.ResourcePostUpdate):
        (registered,) = dispatcher.registry[hook]
        registered(hook=hook)
    assert calls == [{"hook": HookType.ResourcePostCreate}, {"hook": HookType.ResourcePostUpdate}]


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
    def names(hook):
        return {h.__name__ for h in listen.registry[hook]}

    assert {"register_service", "update_last_applied_manifest_from_resp"} <= names(HookType.ResourcePostCreate)
    assert "register_service" in names(HookType.ResourcePostUpdate)
    assert "register_observer" in names(HookType.ClusterCreation)
    assert "unregister_observer" in names(HookType.ClusterDeletion)
    assert listen.registry[HookType.ResourcePreCreate] == []
