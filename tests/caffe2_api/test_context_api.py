"""caffe2.python.context: per-thread current contexts (with, decorator, current(), allow_default)."""

import threading

import pytest

from framework.caffe2.python import context


@context.define_context()
class Scope:
    def __init__(self, tag=""):
        self.tag = tag


@context.define_context(allow_default=True)
class Defaulted:
    pass


def test_nesting_current_and_decorator():
    assert Scope.current(required=False) is None
    with pytest.raises(AssertionError, match="required but none is active"):
        Scope.current()
    with Scope("a") as a:
        assert Scope.current() is a
        with Scope("b") as b:
            assert Scope.current() is b
        assert Scope.current() is a
        other = Scope("c")
        assert Scope.current(other) is other  # an explicit value wins
        with pytest.raises(AssertionError, match="Wrong context type"):
            Scope.current(Defaulted())
    assert Scope.current(required=False) is None

    @Scope("dec")
    def inside():
        return Scope.current().tag

    assert inside() == "dec" and Scope.current(required=False) is None


def test_allow_default_makes_one():
    first = Defaulted.current()
    assert isinstance(first, Defaulted) and Defaulted.current() is first


def test_own_enter_exit_still_run():
    calls = []

    @context.define_context()
    class Logged:
        def __enter__(self):
            calls.append("enter")

        def __exit__(self, *exc):
            calls.append("exit")

    with Logged() as log:
        assert Logged.current() is log
    assert calls == ["enter", "exit"]
    with pytest.raises(AssertionError, match="already defines context"):
        context.define_context()(Logged)


def test_threads_do_not_see_each_other():
    errors, barrier = [], threading.Barrier(4)

    def work(i):
        try:
            with Scope(str(i)) as mine:
                barrier.wait()
                for _ in range(200):
                    assert Scope.current() is mine
        except Exception as e:
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
