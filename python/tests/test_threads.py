"""Calls from several Python threads at once."""

import threading

import kiln


def _run(threads_count, work):
    failures = []

    def target(i):
        try:
            work(i)
        except BaseException as exc:  # noqa: BLE001
            failures.append((i, exc))

    threads = [threading.Thread(target=target, args=(i,)) for i in range(threads_count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures, failures


def test_concurrent_calls(testing):
    shared = kiln.convert(["shared", 1])

    def work(i):
        for j in range(5_000):
            assert testing.echo(j) == j
            assert testing.echo("thread-%d-string-%d" % (i, j)) == "thread-%d-string-%d" % (i, j)
            assert testing.echo(shared).same_as(shared)
            assert testing.add_one(j) == j + 1

    _run(8, work)
    from conftest import ref_count

    assert ref_count(shared) == 1


def test_concurrent_callbacks(testing):
    def work(i):
        for j in range(2_000):
            assert testing.apply(lambda a, b: a * b + i, j, 2) == j * 2 + i
            assert testing.apply(testing.apply, lambda x: [x, i], j) == [j, i]

    _run(6, work)


def test_concurrent_registration(testing):
    def work(i):
        name = "kiln_thread_test.f%d" % i
        for j in range(200):
            kiln.register_func(name, lambda x, j=j: x + j, override=True)
            assert kiln.get_global_func(name)(1) == 1 + j
        kiln.remove_global_func(name)

    _run(4, work)
