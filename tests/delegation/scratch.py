"""One temporary directory per test module, removed when its tests end.

    from scratch import setUpModule, tearDownModule  # noqa: F401

Every tempfile.mkdtemp() and mktemp() of the module then lands in it, so
a gateway's state directory, config and logs go with the module's last
test, also when a test failed before its own clean-up."""

import shutil
import tempfile

_dir = None


def setUpModule():
    global _dir
    _dir = tempfile.mkdtemp(prefix="sg-delegation-")
    tempfile.tempdir = _dir


def tearDownModule():
    global _dir
    tempfile.tempdir = None
    shutil.rmtree(_dir, ignore_errors=True)
    _dir = None
