"""A fork waits for the requests of the process in flight (`dl.kits.remote.store.in_flight`): a DataLoader worker
forked while a download thread was inside a request would inherit the locks it held (an HTTP client's pool)."""

import os
import signal
import threading

from dl.kits.remote.store import in_flight


def test_a_fork_waits_for_a_request_in_flight_and_the_child_starts_with_none():
    inside, leave, order = threading.Event(), threading.Event(), []

    def request():
        with in_flight():
            inside.set()
            leave.wait(timeout=30)
            order.append("request ended")

    thread = threading.Thread(target=request)
    thread.start()
    assert inside.wait(timeout=30)
    threading.Timer(0.2, leave.set).start()  # the fork below starts while the request is in flight
    pid = os.fork()
    if pid == 0:  # the child: a request of its own starts at once (no fork, no request in flight here)
        signal.alarm(10)  # else killed: the exit status below fails the test instead of hanging it
        with in_flight():
            pass
        os._exit(0)
    order.append("forked")
    _, status = os.waitpid(pid, 0)
    thread.join(timeout=30)
    assert order == ["request ended", "forked"]
    assert os.waitstatus_to_exitcode(status) == 0
    with in_flight():  # and the parent's requests go on after the fork
        pass
